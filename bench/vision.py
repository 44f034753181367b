"""Images in: time to first token of a chat turn with one 512×512 image against the same turn without it,
and of a later turn that carries the same image again, on modelport and on llama.cpp's llama-server with
the same model and projector (the tiny one `tests/support/projector.py` writes: llama.cpp scales every
image to its 64×64 input, so the figures are the cost of the path an image takes — fetching, decoding,
checking, re-encoding, hashing, prefilling its tokens — not of a large vision encoder).

    .venv/bin/python -m bench.vision [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import itertools
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from bench import references
from bench.common import http_client, llama_server, machine, median, modelport_server, table
from modelport.engines import llamacpp
from tests.support.projector import tiny_projector

MODEL = "seer"
SLOTS, N_CTX = 2, 4096
QUESTION = "Describe this picture in one sentence, then say what colours it has."


def photo(seed: int) -> str:
    """A 512×512 JPEG data URL, different for every seed (so no run finds another's image in a cache)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:512, 0:512]
    base = np.stack([x / 2, y / 2, (x + y) / 4], axis=-1) + rng.normal(0, 12, (512, 512, 3))
    out = io.BytesIO()
    Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return f"data:image/jpeg;base64,{base64.b64encode(out.getvalue()).decode()}"


def turn(run: int, image: str | None) -> list[dict[str, Any]]:
    """A first turn: its own number in front (no cached prefix), the question, and the image if any."""
    text = {"type": "text", "text": f"{run}. {QUESTION}"}
    content = [text, {"type": "image_url", "image_url": {"url": image}}] if image else [text]
    return [{"role": "user", "content": content}]


async def first_token(client: Any, model: str, messages: list[dict[str, Any]]) -> tuple[float, str]:
    """Seconds to the first streamed text, and the whole answer (for the next turn)."""
    start = time.perf_counter()
    first, answer = 0.0, ""
    stream = await client.chat.completions.create(
        model=model, messages=messages, max_tokens=24, temperature=0, stream=True
    )
    async for chunk in stream:
        piece = chunk.choices[0].delta.content if chunk.choices else None
        if piece:
            first = first or time.perf_counter() - start
            answer += piece
    return first, answer


Case = Callable[[int], Awaitable[float]]


def cases(client: Any, model: str) -> dict[str, Case]:
    async def text(run: int) -> float:
        return (await first_token(client, model, turn(run, None)))[0]

    async def image(run: int) -> float:
        return (await first_token(client, model, turn(run, photo(run))))[0]

    async def later(run: int) -> float:
        messages = turn(run, photo(run))
        _, answer = await first_token(client, model, messages)
        messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And the edges?"}]
        return (await first_token(client, model, messages))[0]

    return {"text only": text, "one 512×512 image, first turn": image, "same image, a later turn": later}


async def main(runs: int) -> None:
    print(f"# Images in: time to first token, median of {runs} interleaved rounds\n\n{machine()}")
    gguf = llamacpp.default_gguf()
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        projector = tiny_projector(folder / "mmproj-tiny.gguf")
        config = (
            f'defaults = false\n[[models]]\nid = "{MODEL}"\nengine = "llamacpp"\npath = "{gguf}"\n'
            f'mmproj = "{projector}"\nn_parallel = {SLOTS}\nn_ctx = {N_CTX}\n'
        )
        servers = {"modelport": cases(http_client(stack.enter_context(modelport_server(config))), MODEL)}
        binary = references.llama_server()
        if binary is None:
            print("\nllama-server: not built (python -m bench.references); its column is absent.")
        else:
            url = stack.enter_context(
                llama_server(binary, gguf, SLOTS, N_CTX, extra=["--mmproj", str(projector)])
            )
            servers["llama-server"] = cases(http_client(url), MODEL)
        results: dict[tuple[str, str], list[float]] = {}
        seeds = itertools.count()  # every turn its own prefix and image
        for name, measures in servers.items():
            for case, one in measures.items():
                await one(next(seeds))  # warm-up
                results[(name, case)] = []
        for _ in range(runs):
            for name, measures in servers.items():
                for case, one in measures.items():
                    results[(name, case)].append(await one(next(seeds)))
    rows = []
    for case in servers["modelport"]:
        ours = median(results[("modelport", case)]) * 1000
        theirs = median(results.get(("llama-server", case), [])) * 1000
        ratio = f"{theirs / ours:.2f}×" if theirs == theirs else "—"
        rows.append([case, ours, theirs if theirs == theirs else "—", ratio])
    headers = ["", "modelport ms", "llama-server ms", "speed vs llama-server"]
    print(table("Time to first token", headers, rows))
    print("\nTarget: ≥ 1.0× llama-server in every row (its time over ours).")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    asyncio.run(main(parser.parse_args().runs))
