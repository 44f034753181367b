"""`modelport engine`: which llama.cpp this machine runs, and building it for this CPU."""

from __future__ import annotations

import argparse
import sys

from modelport.engine_build import compiling
from modelport.engines.llamacpp import cpu_builds


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`engine` and `engine build`."""
    engine = commands.add_parser(
        "engine",
        help="which llama.cpp build runs here, and building one for this CPU",
        description="Without a subcommand: which llama.cpp build `serve` runs and where this CPU's own "
        "build stands. `modelport serve` builds one by itself in the background while it serves on PyPI's "
        "portable wheel (at idle priority, paused while it answers) and runs it from its next start; "
        f"{cpu_builds.VARIABLE}=cached never starts a build, =portable runs the wheel.",
    )
    actions = engine.add_subparsers(dest="action")
    build = actions.add_parser(
        "build",
        help="build llama.cpp for this CPU now (a C++ compiler and the package index needed)",
        description="Compile the installed xllamacpp's llama.cpp for the instruction sets this CPU lists (on "
        "x86 each set ggml has kernels for, AMX with the fix its kernels need; elsewhere GGML_NATIVE) into "
        "the user's cache, from the package index's sources, and check that it loads and generates; `serve` "
        "runs it from its next start. About 7 to 13 minutes on 2 cores, 4 on 16.",
    )
    build.add_argument("--jobs", type=int, help="compilers at once (default: one per CPU)")
    build.add_argument(
        "--idle",
        action="store_true",
        help="compile only on CPU time nothing else wants (SCHED_IDLE), pausing on `pause` and going on on "
        "`go` read from standard input, and stop when it ends (how `serve` runs it)",
    )


def run(args: argparse.Namespace) -> int:
    """`engine` (where the build stands) and `engine build`."""
    try:
        cpu_builds.mode()
    except ValueError as error:
        print(f"modelport: error: {error}", file=sys.stderr)
        return 2
    if args.action == "build":
        if args.idle:
            compiling.idle_priority()
            compiling.follow_server()
        try:
            site = compiling.build(args.jobs, say=lambda line: print(f"modelport: {line}", flush=True))
        except RuntimeError as error:
            print(f"modelport: error: llama.cpp was not built for this CPU: {error}", file=sys.stderr)
            return 1
        print(site)
        return 0
    from modelport.engines.llamacpp import xllamacpp_loader

    now = cpu_builds.state()
    print(f"runs:       {xllamacpp_loader.running().describe()}")
    print(f"this CPU:   {now.state}: {now.detail}")
    if now.place is not None:
        print(f"folder:     {now.place}")
    print(f"mode:       {cpu_builds.mode()} ({cpu_builds.VARIABLE})")
    return 0
