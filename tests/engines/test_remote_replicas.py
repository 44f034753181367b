"""A front `modelport serve` over two worker `modelport serve` processes with the default models: every
endpoint through the front, load spread, sticky routing, and a worker killed mid-run and restarted."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.configs import NO_EOS
from tests.support.live import ROOT, LiveServer, free_port

pytestmark = pytest.mark.slow

# One llama.cpp thread each: two workers and a front share two cores (several busy llama.cpp processes on
# one machine collapse otherwise; see SERVICES.md).
WORKER = """
defaults = false
[[models]]
id = "smollm2-135m-instruct"
engine = "llamacpp"
n_threads = 1
n_parallel = 4
n_ctx = 8192
[[models]]
id = "all-minilm-l6-v2"
engine = "onnx-embedding"
[[models]]
id = "piper-en-us"
engine = "piper"
[[models]]
id = "whisper-tiny-en"
engine = "faster-whisper"
"""


def front_config(workers: list[str]) -> str:
    upstreams = ", ".join(f'"{url}/v1"' for url in workers)
    common = (
        f'engine = "remote"\nupstreams = [{upstreams}]\nhealth = "/health"\nhealth_interval = 1\ncooldown = 1'
    )
    return "\n".join(
        [
            "defaults = false",
            *(
                f'[[models]]\nid = "{name}"\n{common}\nupstream_model = "smollm2-135m-instruct"\n{extra}'
                for name, extra in [
                    ("chat", ""),
                    ("sticky", 'routing = "session"'),
                    ("prefix", 'routing = "prefix"'),
                ]
            ),
            f'[[models]]\nid = "worker"\n{common}\ndiscover = true',
        ]
    )


class Workers:
    """Two workers on fixed ports, so that one can be killed and started again where it was."""

    def __init__(self, folder: Path) -> None:
        self.config = folder / "worker.toml"
        self.config.write_text(WORKER)
        self.ports = [free_port(), free_port()]
        self.live = [self._start(port) for port in self.ports]
        for live in self.live:
            live.wait_ready()

    def _start(self, port: int) -> LiveServer:
        return LiveServer("--config", str(self.config), cwd=ROOT, port=port)

    @property
    def urls(self) -> list[str]:
        return [live.url for live in self.live]

    def served(self) -> list[int]:
        """Chat requests each worker has answered so far."""
        counts = []
        for url in self.urls:
            text = httpx.get(f"{url}/metrics", timeout=10).text
            found = re.findall(
                r'modelport_requests_total\{method="POST",route="/v1/chat/completions",status="\d+"\} (\S+)',
                text,
            )
            counts.append(int(sum(float(n) for n in found)))
        return counts

    def restart(self, index: int) -> None:
        self.live[index].stop()
        self.live[index] = self._start(self.ports[index])
        self.live[index].wait_ready()

    def stop(self) -> None:
        for live in self.live:
            live.stop()


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    started = Workers(tmp_path_factory.mktemp("workers"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def front(workers: Workers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("front")
    (folder / "models.toml").write_text(front_config(workers.urls))
    live = LiveServer("--config", str(folder / "models.toml"), cwd=ROOT)
    live.wait_ready()
    yield live
    live.stop()


def sdk(url: str, timeout: float = 120) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=timeout)


def test_every_endpoint_answers_through_the_front(front: LiveServer, workers: Workers) -> None:
    client, direct = sdk(front.url), sdk(workers.urls[0])
    ids = {m.id: m.model_extra.get("capabilities") for m in client.models.list()}
    assert ids["worker/all-minilm-l6-v2"] == ["embedding"]
    assert ids["worker/piper-en-us"] == ["speech"]
    chat = client.chat.completions.create(
        model="chat",
        messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Say hi."}],
        max_tokens=8,
    )
    assert chat.model == "chat"
    assert chat.choices[0].message.content
    assert chat.usage.completion_tokens > 0
    stream = client.chat.completions.create(
        model="chat",
        messages=[{"role": "user", "content": "Count to ten."}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
        logit_bias=NO_EOS,
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage.completion_tokens == 8
    text = client.completions.create(model="worker/smollm2-135m-instruct", prompt="The sky is", max_tokens=4)
    assert text.choices[0].text
    assert text.model == "worker/smollm2-135m-instruct"
    texts = ["a cat sat on the mat", "a kitten on a rug"]
    through = client.embeddings.create(model="worker/all-minilm-l6-v2", input=texts)
    assert [d.embedding for d in through.data] == [
        d.embedding for d in direct.embeddings.create(model="all-minilm-l6-v2", input=texts).data
    ]
    audio = client.audio.speech.create(
        model="worker/piper-en-us", voice="alloy", input="The weather is lovely today.", response_format="wav"
    )
    # The front passes on what the worker hears (greedy, without the fallback to sampling: the same audio
    # makes the same text), whatever Whisper makes of it.
    heard = client.audio.transcriptions.create(
        model="worker/whisper-tiny-en", file=("a.wav", audio.content), temperature=0
    )
    said = direct.audio.transcriptions.create(
        model="whisper-tiny-en", file=("a.wav", audio.content), temperature=0
    )
    assert heard.text == said.text
    assert heard.text


def test_least_in_flight_spreads_concurrent_requests_evenly(front: LiveServer, workers: Workers) -> None:
    client = openai.AsyncOpenAI(base_url=f"{front.url}/v1", api_key="unused", max_retries=0, timeout=120)

    async def one(i: int) -> None:
        await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": f"{i}: hi"}], max_tokens=16, logit_bias=NO_EOS
        )

    async def sixteen() -> None:
        await asyncio.gather(*(one(i) for i in range(16)))

    before = workers.served()
    asyncio.run(sixteen())
    spread = [after - b for after, b in zip(workers.served(), before, strict=True)]
    assert sum(spread) == 16
    assert all(7 <= n <= 9 for n in spread), spread


@pytest.mark.parametrize("model", ["sticky", "prefix"])
def test_a_conversation_stays_on_one_worker_and_reuses_its_cache(
    front: LiveServer, workers: Workers, model: str
) -> None:
    client = sdk(front.url)
    for person in ["ann", "bob", "cy"]:
        history = [
            {"role": "system", "content": f"You are talking with {person}. Answer briefly."},
            {"role": "user", "content": f"Hello, I am {person}. Tell me about lighthouses."},
        ]
        before = workers.served()
        for _turn in range(3):
            reply = client.chat.completions.create(model=model, messages=history, max_tokens=12, user=person)
            history += [
                reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "user", "content": "More."},
            ]
        spread = [after - b for after, b in zip(workers.served(), before, strict=True)]
        assert sorted(spread) == [0, 3], (person, spread)
        assert reply.usage.prompt_tokens_details.cached_tokens > reply.usage.prompt_tokens // 2


def test_a_killed_worker_fails_only_its_streams_in_flight_and_comes_back(
    front: LiveServer, workers: Workers
) -> None:
    client = openai.AsyncOpenAI(base_url=f"{front.url}/v1", api_key="unused", max_retries=0, timeout=120)
    victim = workers.live[1].process.pid
    streaming: list[int] = []
    all_streaming = asyncio.Event()

    async def stream(i: int) -> str:
        tokens = 0
        answer = await client.chat.completions.create(
            model="chat",
            messages=[{"role": "user", "content": f"{i}: tell a story"}],
            max_tokens=80,
            logit_bias=NO_EOS,
            stream=True,
        )
        finished = None
        try:
            async for chunk in answer:
                tokens += bool(chunk.choices and chunk.choices[0].delta.content)
                finished = (chunk.choices[0].finish_reason if chunk.choices else None) or finished
                if tokens == 3:
                    streaming.append(i)
                    if len(streaming) == 6:
                        all_streaming.set()
        except openai.APIError as error:
            return f"error: {error}"  # an explicit error, never a silent truncation
        # Whole: it ran to max_tokens and said so (a token may carry no text of its own: half a character,
        # held back until the next, so counting the chunks with text undercounts a whole answer).
        return "whole" if finished == "length" else f"truncated at {tokens}"

    async def whole(i: int, client: openai.AsyncOpenAI = client) -> int:
        await asyncio.sleep(0.1 * i)  # before, during and after the kill
        reply = await client.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": f"{i}: hi"}], max_tokens=6, logit_bias=NO_EOS
        )
        return reply.usage.completion_tokens

    async def kill_mid_stream() -> None:
        await all_streaming.wait()  # every stream has begun, about half of them on the victim
        os.kill(victim, signal.SIGKILL)

    async def run() -> tuple[list[str], list[int]]:
        streams = [asyncio.create_task(stream(i)) for i in range(6)]
        killed = asyncio.create_task(kill_mid_stream())
        wholes = await asyncio.gather(*(whole(i) for i in range(20)))
        await killed
        return list(await asyncio.gather(*streams)), list(wholes)

    streams, wholes = asyncio.run(run())
    assert wholes == [6] * 20  # none that had not started streaming failed: retried on the live worker
    cut = [s for s in streams if s != "whole"]
    # Least-in-flight routing puts about half the streams on the victim, but not exactly three: a short
    # request sent among them tips the count, and ties are broken at random. So: some streams are cut, some
    # are whole, and every cut one names the victim, never the live worker.
    assert 1 <= len(cut) < len(streams), streams
    assert all(s.startswith("error: ") and "cut short" in s for s in cut), streams
    assert all(f"upstream {workers.urls[1]}/v1 failed" in s for s in cut), streams
    assert chat_states(front)[f"{workers.urls[1]}/v1"] == "down"

    workers.live[1].process.wait()
    workers.restart(1)
    deadline = time.monotonic() + 30
    while chat_states(front)[f"{workers.urls[1]}/v1"] != "up":
        assert time.monotonic() < deadline, "the restarted worker was not probed back in"
        time.sleep(0.3)
    before = workers.served()
    fresh = openai.AsyncOpenAI(base_url=f"{front.url}/v1", api_key="unused", max_retries=0, timeout=120)

    async def six() -> None:
        await asyncio.gather(*(whole(0, fresh) for _ in range(6)))

    asyncio.run(six())
    assert workers.served()[1] > before[1]


def chat_states(front: LiveServer) -> dict[str, str]:
    """Each replica of the `chat` model, up or down, as the front's /health says."""
    health = httpx.get(f"{front.url}/health").json()
    return {
        r["url"]: r["state"]
        for pool in health["upstreams"]
        if pool["name"] == "chat"
        for r in pool["replicas"]
    }
