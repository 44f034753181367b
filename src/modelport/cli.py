"""`modelport` command line: `serve` runs the HTTP server, `models` lists what it would serve, `pull` and
`rm` manage models from the Hugging Face Hub, `ps` shows what a server has loaded, `chat` talks to a
model."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from modelport import __version__, hub
from modelport.engines import engine_names
from modelport.engines.recognise import model_id as recognised_id
from modelport.engines.recognise import recognise
from modelport.errors import PredictorContractError
from modelport.predictors.registry import ModelRegistry
from modelport.service import Service
from modelport.settings import ModelConfig, Settings

SHUTDOWN_SECONDS = 10  # on SIGTERM, streams in flight get this long to finish before they are ended


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelport", description="Run open-source models behind the OpenAI API."
    )
    parser.add_argument("--version", action="version", version=f"modelport {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    # Which models: shared by `serve` and `models` (which shows what `serve` would serve).
    chosen = argparse.ArgumentParser(add_help=False)
    chosen.add_argument(
        "paths",
        nargs="*",
        metavar="MODEL",
        help="a model file or folder to serve beside the defaults (a GGUF, an ONNX embedding folder, a Piper "
        ".onnx voice, a CTranslate2 Whisper folder), or hf://OWNER/REPO[:QUANT]; its id is the file's stem",
    )
    chosen.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ID=[ENGINE:]PATH",
        help="serve a model file, folder or hf:// reference under this id (and with this engine)",
    )
    chosen.add_argument(
        "--config", help="a models.toml listing models (engines or module:function predictors)"
    )
    chosen.add_argument(
        "--no-defaults", action="store_true", help="serve only the models named here or in --config"
    )

    serve = commands.add_parser(
        "serve",
        parents=[chosen],
        help="serve the OpenAI API over HTTP",
        description="Serve the OpenAI API at http://HOST:PORT/v1 (and /v1/openai/v1).",
    )
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8000)")
    serve.add_argument(
        "--lazy", action="store_true", help="load each model on its first request instead of at start-up"
    )
    serve.add_argument(
        "--keep-alive",
        help="seconds an idle model stays loaded, or `forever` (default: forever when loaded at start-up, "
        "300 with --lazy)",
    )
    serve.add_argument(
        "--memory-budget",
        help="memory the loaded models may take together, e.g. 12GiB; the least recently used idle model "
        "is unloaded to make room (default: 80%% of RAM)",
    )
    serve.add_argument(
        "--no-openai-aliases",
        action="store_true",
        help="do not map OpenAI model names (gpt-4o-mini, …) to the defaults",
    )
    serve.add_argument(
        "--api-key",
        action="append",
        help="require `Authorization: Bearer KEY` on /v1 (repeat for several keys; also MODELPORT_API_KEY, "
        "comma-separated)",
    )
    serve.add_argument("--api-key-file", help="a file of API keys, one per line")
    serve.add_argument("--protect-metrics", action="store_true", help="/metrics needs an API key too")
    serve.add_argument(
        "--cors-origin", action="append", help="let browsers call from this origin (repeat; `*` for any)"
    )
    serve.add_argument(
        "--database",
        help="where stored chat completions and responses live: sqlite:///PATH, postgresql://…, a file path, "
        "or `none` to store nothing (also MODELPORT_DATABASE; default: modelport.db in the user's data "
        "directory)",
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    models = commands.add_parser(
        "models",
        parents=[chosen],
        help="list the models and aliases `serve` would serve with these arguments",
    )
    models.add_argument(
        "--local", action="store_true", help="list the models pulled from the Hugging Face Hub instead"
    )

    pull = commands.add_parser(
        "pull",
        help="download a model from the Hugging Face Hub",
        description="Download OWNER/REPO[:QUANT] into the Hugging Face cache (HF_HOME) and print its path. "
        "A GGUF repository gives one quantisation: QUANT, else Q4_K_M, else the smallest of 4 bits or more.",
    )
    pull.add_argument("repo", metavar="OWNER/REPO[:QUANT]")
    pull.add_argument("--file", help="the file in the repository to pull")

    remove = commands.add_parser("rm", help="delete a pulled model from the Hugging Face cache")
    remove.add_argument("repo", metavar="OWNER/REPO")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `modelport` command."""
    args = _parser().parse_args(argv)

    overrides = {
        "host": getattr(args, "host", None),
        "port": getattr(args, "port", None),
        "preload": False if getattr(args, "lazy", False) else None,
        "defaults": False if getattr(args, "no_defaults", False) else None,
        "openai_aliases": False if getattr(args, "no_openai_aliases", False) else None,
        "api_keys": _api_keys(args) or None,
        "protect_metrics": True if getattr(args, "protect_metrics", False) else None,
        "cors_origins": getattr(args, "cors_origin", None),
        "keep_alive": getattr(args, "keep_alive", None),
        "memory_budget": getattr(args, "memory_budget", None),
    }
    if args.command in ("pull", "rm") or getattr(args, "local", False):
        return _hub_command(args)
    overrides = {k: v for k, v in overrides.items() if v is not None}
    database = getattr(args, "database", None) or os.environ.get("MODELPORT_DATABASE")
    try:
        settings = (
            Settings.from_toml(args.config, **overrides)
            if getattr(args, "config", None)
            else Settings.model_validate(overrides)
        )
        if database:  # the command line and the environment win over models.toml's [store] url
            settings.store.url = database
        settings.models += _named_models(getattr(args, "paths", []), getattr(args, "model", []))
        registry = ModelRegistry.from_settings(settings)
    except (OSError, ValueError, PredictorContractError) as error:  # a bad config: say what, no traceback
        print(f"modelport: error: {error}", file=sys.stderr)
        return 2

    if args.command == "models":
        for spec in registry.specs:
            print(f"{spec.id}\t{spec.source}")
        for alias, target in registry.aliases.items():
            print(f"{alias}\t→ {target}")
        return 0
    return _serve(Service(registry, settings), args.log_level)


def _named_models(paths: list[str], named: list[str]) -> list[ModelConfig]:
    """Models named on the command line: `PATH` (its id from the file name) or `ID=[ENGINE:]PATH`, a path
    or an hf:// reference (pulled now). Each is recognised now, so a wrong one stops the server starting."""
    found = []
    given: list[tuple[str | None, str]] = [(None, p) for p in paths] + [_id_and_path(n) for n in named]
    for model_id, target in given:
        engine, _, rest = target.partition(":")
        if not rest or engine not in engine_names() or target.startswith(hub.PREFIX):
            engine, rest = "", target
        path = hub.pull(rest) if hub.is_reference(rest) else Path(rest).expanduser()
        engine, options = recognise(path, engine or None)
        if model_id is None:  # a pulled folder is named by its commit: the repository names it better
            from_hub = hub.is_reference(rest) and path.is_dir()
            model_id = hub.parse(rest).repo.split("/")[1] if from_hub else recognised_id(path)
        found.append(ModelConfig.model_validate({"id": model_id, "engine": engine, **options}))
    return found


def _id_and_path(named: str) -> tuple[str, str]:
    model_id, equals, target = named.partition("=")
    if not equals or not model_id or not target:
        raise ValueError(f"--model {named}: expected ID=PATH or ID=ENGINE:PATH")
    return model_id, target


def _hub_command(args: argparse.Namespace) -> int:
    """`pull`, `rm` and `models --local`: the Hugging Face cache."""
    try:
        if args.command == "pull":
            ref = hub.parse(args.repo)
            if args.file:
                ref = hub.Reference(ref.repo, ref.revision, args.file, None)
            print(hub.pull(ref))
        elif args.command == "rm":
            print(f"removed {args.repo} ({hub.remove(args.repo) / 2**20:.0f} MiB freed)")
        else:
            for repo, size, folder in hub.cached():
                print(f"{repo}\t{size / 2**20:.0f} MiB\t{folder}")
    except ValueError as error:
        print(f"modelport: error: {error}", file=sys.stderr)
        return 1
    return 0


def _api_keys(args: argparse.Namespace) -> list[str]:
    keys = list(getattr(args, "api_key", None) or [])
    keys += [k.strip() for k in os.environ.get("MODELPORT_API_KEY", "").split(",") if k.strip()]
    if getattr(args, "api_key_file", None):
        with open(args.api_key_file) as file:
            keys += [line.strip() for line in file if line.strip() and not line.startswith("#")]
    return keys


def _serve(service: Service, log_level: str) -> int:
    import uvicorn

    from modelport.server import create_app

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per upstream request and health probe
    settings = service.settings
    print(f"modelport {__version__}: serving http://{settings.host}:{settings.port}/v1", file=sys.stderr)
    if not settings.api_keys and not _loopback(settings.host):
        print(
            f"modelport: warning: serving on {settings.host} without an API key: anyone who can reach this "
            "port can use the models. Set --api-key or MODELPORT_API_KEY.",
            file=sys.stderr,
        )
    uvicorn.run(
        create_app(settings, service),
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        access_log=False,  # modelport.access logs each request, with its id
    )
    return 0


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


if __name__ == "__main__":
    raise SystemExit(main())
