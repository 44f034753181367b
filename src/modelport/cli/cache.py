"""`modelport pull`, `rm` and `models --local`: models in the Hugging Face cache."""

from __future__ import annotations

import argparse
import sys

from modelport import hub


def run(args: argparse.Namespace) -> int:
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
