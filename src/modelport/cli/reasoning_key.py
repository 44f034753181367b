"""`modelport reasoning-key rotate`: a new key seals the reasoning this server gives stateless clients
(`include: ["reasoning.encrypted_content"]`); blobs sealed with the keys before it still open."""

from __future__ import annotations

import argparse

from modelport.settings import data_dir


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`reasoning-key rotate`."""
    key = commands.add_parser(
        "reasoning-key",
        help="the key that seals reasoning for stateless clients (encrypted_content)",
        description="The keys live in the data folder (reasoning-keys.json, in MODELPORT_DATA_DIR or the "
        "user's data directory); the newest seals, the three newest open. A running server reads them when "
        "it starts.",
    )
    actions = key.add_subparsers(dest="action", required=True)
    actions.add_parser("rotate", help="make a new key the one that seals; the older ones still open")


def run(args: argparse.Namespace) -> int:
    """`reasoning-key rotate`."""
    from modelport.service.responses.sealing import Sealer  # the service, loaded by the command that uses it

    sealer = Sealer(data_dir())
    kept = sealer.rotate()
    print(f"{sealer.path}: a new key seals reasoning; {kept} key{'s' if kept > 1 else ''} open it")
    return 0
