"""GGUF language models through llama.cpp's own server, embedded in-process by `xllamacpp`.

llama.cpp's server brings continuous batching over parallel slots, prompt caching and the GGUF's own chat
template. `launch` starts it, `generators` are the chat and completion predictors over it, `instances`
adds one without speculation for log-probabilities, `conversations` keeps chat histories' KV cache for
later turns, `chunk_stream` turns its callbacks into iterators, `scoring` scores prompts with another
instance.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from modelport.engines import Engine
from modelport.engines.llamacpp import conversation_cache, gguf_header, template_probe
from modelport.engines.llamacpp.generators import LlamaChat, LlamaCompletion, vocabulary_size
from modelport.engines.llamacpp.instances import Instances
from modelport.engines.llamacpp.launch import SLOTS, SideDoor, default_gguf, start_server
from modelport.predictors.chat_format import ChatFormat, shown_tools

# A stream's tokens that come faster than this are sent together at most this often (`ChunkStream.bunch`).
# Waking the serving thread costs it ~0.3 ms of CPU on a 2-core machine busy decoding, a token's frame and
# write 0.02 ms once it is awake: once a bunch, not once a token, for a delay no reader sees (text shown 20
# times a second; a person reads a word in ~250 ms).
STREAM_INTERVAL_MS = 50.0

__all__ = ["ENGINE", "SLOTS", "LlamaChat", "LlamaCompletion", "default_gguf", "start_server"]


def load(
    conversation_cache_mib: int = 1024, stream_interval_ms: float = STREAM_INTERVAL_MS, **options: Any
) -> Sequence[LlamaChat | LlamaCompletion]:
    """Load a GGUF (options as for `start_server`) and return its chat and completion predictors.
    `conversation_cache_mib` > 0 has modelport place chat and completion requests and keep their turns for
    later ones, in files of at most that many MiB (`conversations`); 0 leaves placement to llama.cpp. A
    draft model keeps it off: a saved slot holds the main model's cache only. A stream's tokens that come
    faster than one every `stream_interval_ms` are sent together at most that often (0: each at once)."""
    if stream_interval_ms < 0:
        raise ValueError(f"stream_interval_ms must be 0 or more, not {stream_interval_ms}")
    key = secrets.token_urlsafe(32)
    budget = conversation_cache_mib << 20
    saved = conversation_cache.folder(budget) if budget > 0 and not options.get("draft") else None
    gguf = Path(options["path"]) if options.get("path") else default_gguf()
    # The model's own format, read from its template before it loads: a format modelport reads has the
    # answer handed over raw (`raw_chat`), with special-token markers written as text.
    own = _own_template(options.get("path"), options.get("chat_template"))
    template, form = chat_format(options.get("path"), own)
    options = {**options, "raw_chat": form.read_here, "special_text": bool(form.special)}
    given = template_probe.given_thinking(template, form.harmony) if form.read_here else template
    if given != own:
        options["chat_template"] = given
    server = start_server(**options, api_key=key, slot_save_path=saved)
    door = SideDoor(server, key)
    instances = Instances(server, options, gguf)
    media = ("image",) if options.get("mmproj") else ()
    kept = conversation_cache.ConversationCache(door, saved, budget, gguf.name) if saved else None
    vocab_size = vocabulary_size(door)
    pace = stream_interval_ms / 1000
    chat = LlamaChat(instances, door, vocab_size, form, media, kept, pace)
    return [chat, LlamaCompletion(instances, door, vocab_size, gguf, kept, pace)]


def chat_format(
    path: str | None = None, chat_template: str | None = None, **_: Any
) -> tuple[str, ChatFormat]:
    """The chat template a GGUF model renders with (its own, or the one its options give; given the tools
    where it writes its family's calls but shows none, `shown_tools`) and the format it shows, read without
    loading the model (`modelport models`, and the load itself)."""
    gguf = Path(path) if path else default_gguf()
    template = shown_tools(_own_template(path, chat_template))
    return template, template_probe.formatted(template, gguf)


def _own_template(path: str | None, chat_template: str | None) -> str:
    """The chat template a GGUF model comes with, or the one its options give."""
    gguf = Path(path) if path else default_gguf()
    return str(chat_template or gguf_header.read(gguf).get("tokenizer.chat_template") or "")


def estimate(
    path: str | None = None,
    n_parallel: int = SLOTS,
    n_ctx: int = 32768,
    n_ctx_per_slot: int | None = None,
    **_: Any,
) -> int:
    """Bytes the model will take: its file, and a KV cache of 16-bit keys and values for every layer and
    context position (within 10% of the RSS a load adds, for SmolLM2 at 2k and 32k contexts)."""
    gguf = Path(path) if path else default_gguf()
    header = gguf_header.read(gguf)
    arch = header.get("general.architecture", "")
    layers = int(header.get(f"{arch}.block_count", 0))
    width = int(header.get(f"{arch}.embedding_length", 0))
    heads = int(header.get(f"{arch}.attention.head_count", 1)) or 1
    kv_width = width // heads * int(header.get(f"{arch}.attention.head_count_kv", heads))
    positions = n_ctx if n_ctx_per_slot is None else n_ctx_per_slot * n_parallel
    return gguf.stat().st_size + 2 * 2 * layers * kv_width * positions


def describe(path: str | None = None, **_: Any) -> dict[str, Any]:
    """What the GGUF's header says the model is (`gguf_header.model_info`), read without loading it; nothing
    for a file not here yet (an `hf://` reference not pulled)."""
    gguf = Path(path).expanduser() if path else default_gguf()
    if not gguf.is_file():
        return {}
    found = gguf.stat()
    return dict(_model_info(gguf, found.st_size, found.st_mtime_ns))


@functools.lru_cache(maxsize=64)  # ~25 ms a read (the vocabulary stepped over): once a file
def _model_info(gguf: Path, size: int, modified: int) -> dict[str, Any]:
    return gguf_header.model_info(gguf)


def recognise(path: Path) -> dict[str, Any] | None:
    """A GGUF file, or a folder holding one (beside which a projector may lie)."""
    if path.is_dir():
        found = [p for p in sorted(path.glob("*.gguf")) if "mmproj" not in p.name.lower()]
        if len(found) != 1:
            return None
        path = found[0]
    if path.suffix != ".gguf":
        with open(path, "rb") as file:
            if file.read(4) != b"GGUF":
                return None
    gguf_header.read(path)  # not a GGUF after all, or a damaged header: fails here, naming the file
    return {"path": str(path)}


ENGINE = Engine(
    load,
    estimate=estimate,
    describe=describe,
    recognise=recognise,
    recognises="a GGUF file (or a folder holding one)",
    concurrency=lambda options: int(options.get("n_parallel", SLOTS)),
    cpus=lambda options: float(options.get("n_threads") or 1),
    takes=start_server,
    withheld=("api_key", "slot_save_path", "raw_chat", "special_text"),
)
