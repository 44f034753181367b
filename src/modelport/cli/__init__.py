"""`modelport` command line: `serve` runs the HTTP server, `models` lists what it would serve, `pull` and
`rm` manage models from the Hugging Face Hub, `ps` shows what a server has loaded, `chat` talks to a
model, `llama-stack-config` puts Llama Stack on top of a server; `projects`, `keys` and `usage` manage who
may call a server and show what each project used; `engine` shows and builds the llama.cpp it runs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from modelport import __version__
from modelport.cli import cache, engine, projects, reasoning_key, stack
from modelport.cli import serve as serving
from modelport.errors import PredictorContractError
from modelport.settings import Settings


def parser() -> argparse.ArgumentParser:
    """The `modelport` command's arguments."""
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
        "--mmproj",
        metavar="PROJECTOR.gguf",
        help="the multimodal projector of the one GGUF named here: the model then reads images "
        "(a GGUF pulled from a repository that has one gets it without this)",
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
        description="Serve the OpenAI API at http://HOST:PORT/v1 (and /v1/openai/v1), and a playground "
        "page at /.",
    )
    serve.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="run each model as a Ray Serve deployment (replicas, num_cpus, num_gpus, autoscaling per model "
        "in models.toml) behind this server: no ADDRESS starts a local Ray, `auto` or ray://… joins a "
        "cluster; needs `pip install 'modelport[ray]'`",
    )
    serve.add_argument(
        "--ray-timeout",
        type=float,
        metavar="SECONDS",
        help="with --ray: stop, naming the deployments not ready and Ray's reason, after this long "
        "(default 600)",
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
    serve.add_argument("--no-ui", action="store_true", help="do not serve the playground page at /")
    serve.add_argument("--protect-metrics", action="store_true", help="/metrics needs an API key too")
    serve.add_argument(
        "--open-metrics",
        action="store_true",
        help="/metrics stays open to anyone though projects have keys (else it then needs an admin key)",
    )
    serve.add_argument(
        "--cors-origin", action="append", help="let browsers call from this origin (repeat; `*` for any)"
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        help="on a loopback address, serve requests addressed to this name too (a proxy's, a tunnel's; "
        "repeat; `*` for any): others than localhost, IP addresses and this machine's name are refused, "
        "as a web page's DNS rebinding would send",
    )
    serve.add_argument(
        "--database",
        help="where stored chat completions and responses live: sqlite:///PATH, postgresql://…, a file path, "
        "or `none` to store nothing (also MODELPORT_DATABASE; default: modelport.db in the user's data "
        "directory)",
    )
    serve.add_argument(
        "--allow-fetch",
        action="append",
        metavar="HOST|HOST:PORT|CIDR",
        help="fetch URLs that requests give (file_url) from here although it is not a public address, and "
        "over http (repeat; default: public https addresses only)",
    )
    serve.add_argument(
        "--no-remote-fetch", action="store_true", help="fetch no URL a request gives (such a part is a 400)"
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

    # A running server, seen from the terminal: shared by `ps` and `chat`.
    running = argparse.ArgumentParser(add_help=False)
    running.add_argument(
        "--url",
        default=os.environ.get("MODELPORT_URL", "http://127.0.0.1:8000/v1"),
        help="the server's OpenAI address (default: MODELPORT_URL, else http://127.0.0.1:8000/v1)",
    )
    running.add_argument(
        "--api-key", default=os.environ.get("OPENAI_API_KEY"), help="default: OPENAI_API_KEY"
    )
    commands.add_parser(
        "ps",
        parents=[running],
        help="list the models a running server has loaded, their memory and idle time",
    )
    chat = commands.add_parser(
        "chat", parents=[running], help="chat with a model in the terminal, answers streamed"
    )
    chat.add_argument(
        "model", nargs="?", default="gpt-4o-mini", help="model id or alias (default gpt-4o-mini)"
    )
    chat.add_argument("--system", help="a system prompt")
    chat.add_argument("--max-tokens", type=int, help="the longest answer, in tokens (default: no bound)")
    chat.add_argument(
        "--in-process", action="store_true", help="run the model in this process instead of asking a server"
    )
    chat.add_argument("--config", help="with --in-process: a models.toml")
    llama_stack = commands.add_parser(
        "llama-stack-config",
        parents=[running],
        help="write a Llama Stack run config whose inference is a running modelport",
        description="Ask a running modelport which models it serves and write a Llama Stack run config "
        "(its remote::vllm provider) that registers each chat model as `llm` and each embedding model as "
        "`embedding` with its dimension, with the Responses API, files and vector stores (faiss). "
        "Start it with `llama stack run FILE`; the stack reads the key from MODELPORT_API_KEY.",
    )
    llama_stack.add_argument("-o", "--output", help="the file to write (default: standard output)")
    llama_stack.add_argument("--port", type=int, default=8321, help="the stack's own port (default 8321)")

    # The store `serve` uses, for the commands that manage what lives there.
    stored = argparse.ArgumentParser(add_help=False)
    stored.add_argument("--config", help="the models.toml `serve` reads (for its [store] url)")
    stored.add_argument(
        "--database", help="the store: sqlite:///PATH, postgresql://…, a file path (default as `serve`)"
    )
    projects.add_commands(commands, stored)
    engine.add_commands(commands)
    reasoning_key.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `modelport` command."""
    try:
        return _run(parser().parse_args(argv))
    except BrokenPipeError:  # `modelport models | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor fail flushing at exit
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command in ("pull", "rm") or getattr(args, "local", False):
        return cache.run(args)
    if args.command in ("ps", "chat"):
        from modelport.cli import terminal  # the SDK, loaded by the commands that use it

        return terminal.ps(args) if args.command == "ps" else terminal.chat(args)
    if args.command == "llama-stack-config":
        return stack.write(args)
    if args.command == "engine":
        return engine.run(args)
    if args.command == "reasoning-key":
        return reasoning_key.run(args)
    if args.command in ("projects", "keys", "usage"):
        try:
            settings = settings_of(args)
        except (OSError, ValueError) as error:
            print(f"modelport: error: {error}", file=sys.stderr)
            return 2
        return projects.run(args, settings)
    # The engines load only now, and the service only to serve: the other commands start without them.
    from modelport.engines import assemble

    try:
        settings = settings_of(args)
    except (OSError, ValueError, PredictorContractError) as error:  # a bad config: say what, no traceback
        print(f"modelport: error: {error}", file=sys.stderr)
        return 2
    listener = None
    if args.command == "serve":  # before models load or deploy: a port in use is said at once
        try:
            listener = serving.listen(settings.host, settings.port)
        except OSError as error:
            print(f"modelport: error: {error}", file=sys.stderr)
            return serving.STARTUP_FAILURE
    try:
        registry = (
            serving.on_ray(settings, args.ray) if getattr(args, "ray", None) else assemble.registry(settings)
        )
    except (OSError, ValueError, PredictorContractError) as error:  # a bad config: say what, no traceback
        if listener is not None:
            listener.close()
        print(f"modelport: error: {error}", file=sys.stderr)
        return 2

    if args.command == "models":
        formats = _chat_formats(settings)
        for spec in registry.specs:
            shown = f"\t{formats[spec.id]}" if spec.id in formats else ""
            print(f"{spec.id}\t{spec.source}{shown}")
        for name, pipeline in settings.pipelines().items():
            chained = f"{pipeline.transcription} → {pipeline.chat} → {pipeline.speech}"
            print(f"{name}\trealtime pipeline: {pipeline.vad} VAD, {chained}")
        for alias, target in registry.aliases.items():
            print(f"{alias}\t→ {target}")
        for covers, target in settings.openai_families():
            print(f"{covers}\t→ {target} (OpenAI's model names, by family)")
        return 0
    from modelport.service import Service

    assert listener is not None
    return serving.serve(Service(registry, settings), args.log_level, listener, on_ray=bool(args.ray))


def _chat_formats(settings: Settings) -> dict[str, str]:
    """How each GGUF chat model writes its calls and its thinking, read from its template without loading
    it (one that cannot be read is left out: `serve` says why when it loads)."""
    from modelport.engines import llamacpp
    from modelport.predictors.chat_format import PLAIN

    found = {}
    for config in settings.all_models():
        if config.engine != "llamacpp":
            continue
        try:
            _, form = llamacpp.chat_format(**config.options)
        except (OSError, ValueError):
            continue
        if form != PLAIN:  # a model with no format of its own gets modelport's, as every other
            found[str(config.id)] = form.describe()
    return found


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings `serve` and `models` run with: models.toml, then the command line and the environment
    over it (the models named on the command line are recognised, or pulled, now)."""
    overrides = {
        "host": getattr(args, "host", None),
        "port": getattr(args, "port", None),
        "preload": False if getattr(args, "lazy", False) else None,
        "defaults": False if getattr(args, "no_defaults", False) else None,
        "openai_aliases": False if getattr(args, "no_openai_aliases", False) else None,
        "api_keys": serving.api_keys(args) or None,
        "protect_metrics": True if getattr(args, "protect_metrics", False) else None,
        "open_metrics": True if getattr(args, "open_metrics", False) else None,
        "ui": False if getattr(args, "no_ui", False) else None,
        "cors_origins": getattr(args, "cors_origin", None),
        "allowed_hosts": getattr(args, "allowed_host", None),
        "keep_alive": getattr(args, "keep_alive", None),
        "memory_budget": getattr(args, "memory_budget", None),
        "allow_fetch": getattr(args, "allow_fetch", None),
        "ray_ready_timeout": getattr(args, "ray_timeout", None),
        "remote_fetch": False if getattr(args, "no_remote_fetch", False) else None,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    database = getattr(args, "database", None) or os.environ.get("MODELPORT_DATABASE")
    settings = (
        Settings.from_toml(args.config, **overrides)
        if getattr(args, "config", None)
        else Settings.model_validate(overrides)
    )
    if database:  # the command line and the environment win over models.toml's [store] url
        settings.store.url = database
    settings.models += serving.named_models(
        getattr(args, "paths", []), getattr(args, "model", []), getattr(args, "mmproj", None)
    )
    return settings
