"""`modelport` command line: `serve` runs the HTTP server, `models` lists what it would serve."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence

from modelport import __version__
from modelport.errors import PredictorContractError
from modelport.predictors.registry import ModelRegistry
from modelport.service import Service
from modelport.settings import Settings

SHUTDOWN_SECONDS = 10  # on SIGTERM, streams in flight get this long to finish before they are ended


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelport", description="Run open-source models behind the OpenAI API."
    )
    parser.add_argument("--version", action="version", version=f"modelport {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve",
        help="serve the OpenAI API over HTTP",
        description="Serve the OpenAI API at http://HOST:PORT/v1 (and /v1/openai/v1).",
    )
    serve.add_argument(
        "--config", help="a models.toml listing models (engines or module:function predictors)"
    )
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8000)")
    serve.add_argument(
        "--lazy", action="store_true", help="load each model on its first request instead of at start-up"
    )
    serve.add_argument("--no-defaults", action="store_true", help="do not serve the default models")
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

    models = commands.add_parser("models", help="list the models and aliases a configuration serves")
    models.add_argument("--config", help="a models.toml")
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
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    database = getattr(args, "database", None) or os.environ.get("MODELPORT_DATABASE")
    try:
        settings = (
            Settings.from_toml(args.config, **overrides)
            if args.config
            else Settings.model_validate(overrides)
        )
        if database:  # the command line and the environment win over models.toml's [store] url
            settings.store.url = database
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
