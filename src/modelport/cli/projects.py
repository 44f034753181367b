"""`modelport projects`, `modelport keys` and `modelport usage`: projects, their keys and what they used,
managed in the store `serve` uses (the same `--config` and `--database`), also while a server runs."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from modelport.errors import ModelportError
from modelport.protocol.admin_requests import ProjectLimits
from modelport.settings import Settings

if TYPE_CHECKING:
    from modelport.service.access import Access
    from modelport.store import Store

_SINCE = re.compile(r"(\d+)([mhd])")


def add_commands(commands: Any, store_options: argparse.ArgumentParser) -> None:
    """Add the `projects`, `keys` and `usage` commands."""
    limits = argparse.ArgumentParser(add_help=False)
    limits.add_argument(
        "--rpm",
        action="append",
        metavar="[MODEL=]N",
        help="requests per minute (for one model with MODEL=N; repeat)",
    )
    limits.add_argument(
        "--tpm", action="append", metavar="[MODEL=]N", help="tokens per minute (for one model with MODEL=N)"
    )
    limits.add_argument("--models", help="the only models it may use, comma-separated")

    projects = commands.add_parser(
        "projects", help="create and list projects (each has its own stored objects, keys and limits)"
    )
    project_commands = projects.add_subparsers(dest="action", required=True)
    create = project_commands.add_parser("create", parents=[store_options, limits], help="create a project")
    create.add_argument("name")
    project_commands.add_parser("list", parents=[store_options], help="list the projects")
    change = project_commands.add_parser(
        "limit", parents=[store_options, limits], help="replace a project's limits"
    )
    change.add_argument("name", help="the project's name or id")
    archive = project_commands.add_parser(
        "archive", parents=[store_options], help="archive a project: its keys stop working"
    )
    archive.add_argument("name", help="the project's name or id")

    keys = commands.add_parser("keys", help="create, list and revoke API keys")
    key_commands = keys.add_subparsers(dest="action", required=True)
    create_key = key_commands.add_parser(
        "create",
        parents=[store_options, limits],
        help="create a key and print it (once, alone on the last line)",
    )
    create_key.add_argument("--project", required=True, help="the project's name or id")
    create_key.add_argument("--name", default="", help="a label to tell the key apart")
    create_key.add_argument(
        "--admin", action="store_true", help="an admin key: also the organization API (/v1/organization)"
    )
    create_key.add_argument("--expires", type=float, metavar="DAYS", help="the key stops working after")
    listing = key_commands.add_parser("list", parents=[store_options], help="list keys (never the keys)")
    listing.add_argument("--project", help="only this project's")
    revoke = key_commands.add_parser("revoke", parents=[store_options], help="revoke a key")
    revoke.add_argument("key_id")

    usage = commands.add_parser(
        "usage", parents=[store_options], help="what each project used, per model (tokens, requests, audio)"
    )
    usage.add_argument("--project", help="only this project (name or id)")
    usage.add_argument(
        "--since",
        default="1d",
        help="from this long ago (30m, 12h, 7d) or this date (YYYY-MM-DD); default 1d",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Carry out one of the commands."""
    # The store and the service load here, not where the command line is read: every other command (and
    # `--help`) starts without them, in a fraction of the time.
    from modelport.store import Store

    url = settings.store.resolved_url()
    if url is None:
        print("modelport: error: projects and keys live in the store, and it is off (none)", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args, Store(url), settings))
    except ModelportError as error:
        print(f"modelport: error: {error.message}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace, store: Store, settings: Settings) -> int:
    from modelport.service.access import Access

    access = Access(store, settings)
    admin = access.admin
    try:
        if args.command == "projects" and args.action == "create":
            made = await admin.create_project(args.name, _limits(args))
            print(f"{made.id}\t{made.name}")
        elif args.command == "projects" and args.action == "list":
            _table(
                ["ID", "NAME", "STATUS", "CREATED", "LIMITS"],
                [
                    [p.id, p.name or "", p.status, _date(p.created_at), _shown(p.limits)]
                    for p in await admin.projects(include_archived=True)
                ],
            )
        elif args.command == "projects" and args.action == "limit":
            changed = await admin.modify_project(args.name, limits=_limits(args))
            print(f"{changed.id}\t{changed.name}\t{_shown(changed.limits)}")
        elif args.command == "projects" and args.action == "archive":
            archived = await admin.archive_project(args.name)
            print(f"{archived.id}\t{archived.name}\tarchived")
        elif args.command == "keys" and args.action == "create":
            key = await admin.create_key(
                args.project,
                name=args.name,
                admin=args.admin,
                expires_days=args.expires,
                limits=_limits(args),
            )
            expires = f", expires {_date(key.expires_at)}" if key.expires_at else ""
            print(f"{key.id} ({key.role}) of project {key.project_id}{expires}.")
            print("The key, shown this once:")
            print(key.value)
        elif args.command == "keys" and args.action == "list":
            _table(
                ["ID", "PROJECT", "NAME", "ROLE", "STATUS", "KEY", "LAST USED", "EXPIRES"],
                [
                    [
                        k.id,
                        k.project_id,
                        k.name,
                        k.role,
                        k.status,
                        k.redacted_value,
                        _date(k.last_used_at),
                        _date(k.expires_at),
                    ]
                    for k in await admin.key_list(args.project)
                ],
            )
        elif args.command == "keys" and args.action == "revoke":
            await admin.revoke_key(args.key_id)
            print(f"{args.key_id}\trevoked")
        elif args.command == "usage":
            await _usage(access, args)
        return 0
    finally:
        await store.close()


async def _usage(access: Access, args: argparse.Namespace) -> None:
    projects = [(await access.admin.project(args.project)).id] if args.project else None
    start = _since(args.since)
    rows: list[list[str]] = []
    for kind, fields in (
        ("completions", ("input_tokens", "input_cached_tokens", "output_tokens")),
        ("embeddings", ("input_tokens",)),
        ("audio_speeches", ("characters",)),
        ("audio_transcriptions", ("seconds",)),
    ):
        page = await access.meter.page(
            kind,
            start_time=start,
            bucket_width="1d",
            limit=31,
            project_ids=projects,
            group_by=["project_id", "model"],
        )
        totals: dict[tuple[str, str], dict[str, float]] = {}
        for bucket in page["data"]:
            for result in bucket["results"]:
                total = totals.setdefault((result["project_id"], result["model"]), {})
                for name in ("num_model_requests", *fields):
                    total[name] = total.get(name, 0) + result[name]
        for (project, model), total in sorted(totals.items()):
            counts = ", ".join(f"{name} {total[name]:g}" for name in fields)
            rows.append([project, model, kind, str(int(total["num_model_requests"])), counts])
    _table(["PROJECT", "MODEL", "KIND", "REQUESTS", "USED"], rows)


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    per_model: dict[str, dict[str, int]] = {}
    found: dict[str, int] = {}
    for field in ("rpm", "tpm"):
        for value in getattr(args, field, None) or []:
            model, _, number = value.rpartition("=")
            if not number.isdigit():
                raise SystemExit(f"modelport: error: --{field} takes N or MODEL=N, not {value!r}")
            if model:
                per_model.setdefault(model, {})[field] = int(number)
            else:
                found[field] = int(number)
    models = [m.strip() for m in (getattr(args, "models", None) or "").split(",") if m.strip()]
    from modelport.service.access.admin import limits_of

    return limits_of(found.get("rpm"), found.get("tpm"), models or None, per_model or None)


def _since(given: str) -> int:
    relative = _SINCE.fullmatch(given)
    if relative:
        seconds = int(relative[1]) * {"m": 60, "h": 3600, "d": 86400}[relative[2]]
        return (int(time.time()) - seconds) // 60 * 60
    try:
        return int(datetime.fromisoformat(given).replace(tzinfo=UTC).timestamp())
    except ValueError:
        raise SystemExit(
            f"modelport: error: --since takes 30m, 12h, 7d or YYYY-MM-DD, not {given!r}"
        ) from None


def _date(stamp: int | None) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M") if stamp else "-"


def _shown(limits: ProjectLimits) -> str:
    parts = [f"{name} {value}" for name, value in (("rpm", limits.rpm), ("tpm", limits.tpm)) if value]
    if limits.models:
        parts.append("models " + ",".join(limits.models))
    for model, own in (limits.per_model or {}).items():
        parts += [f"{model}: {name} {value}" for name, value in own.model_dump(exclude_none=True).items()]
    return "; ".join(parts) or "-"


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())
