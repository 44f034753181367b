"""`modelport ps` and `modelport chat`: a running server seen from the terminal (chat also in-process)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx
import openai


def ps(args: argparse.Namespace) -> int:
    """The models a server has loaded: their memory, idle time, and how long until an idle unload."""
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    try:
        response = httpx.get(f"{args.url}/models", params={"loaded": "true"}, headers=headers, timeout=10)
    except httpx.HTTPError as error:
        print(f"modelport: error: cannot reach {args.url}: {error}", file=sys.stderr)
        return 1
    if response.status_code != 200:
        print(
            f"modelport: error: {args.url} answered {response.status_code}: {response.text}", file=sys.stderr
        )
        return 1
    rows = [("MODEL", "MEMORY", "IDLE", "UNLOADED WHEN IDLE FOR")]
    for model in response.json()["data"]:
        keep_alive = model.get("keep_alive")
        rows.append(
            (
                model["id"],
                f"{model.get('memory_bytes', 0) / 2**20:.0f} MiB",
                f"{model.get('idle_seconds', 0):.0f} s",
                "never" if keep_alive is None else f"{keep_alive:.0f} s",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    builds = {model["engine_build"] for model in response.json()["data"] if "engine_build" in model}
    for build in sorted(builds):
        print(f"engine: {build}")
    return 0


def chat(args: argparse.Namespace) -> int:
    """Talk to a model, each answer streamed as it is written; `/clear` starts over, `/exit` or Ctrl-D
    leaves, Ctrl-C stops an answer."""
    import readline  # noqa: F401 (line editing and history for input())

    client: Any
    if args.in_process:
        import modelport

        client = modelport.OpenAI(config=args.config)
    else:
        client = openai.OpenAI(base_url=args.url, api_key=args.api_key or "none", max_retries=0)
    start = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(start)
    where = "in this process" if args.in_process else args.url
    print(f"{args.model} at {where}: /clear starts over, /exit or Ctrl-D leaves", file=sys.stderr)
    while True:
        try:
            line = input(">>> ").strip()
        except EOFError:
            print()
            return 0
        if line in ("/exit", "/quit"):
            return 0
        if line == "/clear":
            messages = list(start)
            continue
        if not line:
            continue
        messages.append({"role": "user", "content": line})
        try:
            said = _stream(client, args.model, messages, args.max_tokens)
            messages.append({"role": "assistant", "content": said})
        except openai.APIConnectionError:
            print(
                f"modelport: error: cannot reach {args.url}: start `modelport serve`, or use --in-process",
                file=sys.stderr,
            )
            return 1
        except openai.APIError as error:
            print(f"error: {getattr(error, 'message', error)}", file=sys.stderr)
            messages.pop()


def _stream(client: Any, model: str, messages: list[dict[str, str]], max_tokens: int | None) -> str:
    """Print an answer as it streams; Ctrl-C ends it early (what was said so far is kept)."""
    said = []
    bound = {"max_tokens": max_tokens} if max_tokens else {}
    stream = client.chat.completions.create(model=model, messages=messages, stream=True, **bound)
    try:
        for chunk in stream:
            piece = chunk.choices[0].delta.content if chunk.choices else None
            if piece:
                said.append(piece)
                print(piece, end="", flush=True)
    except KeyboardInterrupt:
        stream.close()
    print()
    return "".join(said)
