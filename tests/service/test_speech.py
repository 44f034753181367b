"""Speech like a dedicated server: every format, voices, speed, streaming (openai SDK, both faces)."""

from __future__ import annotations

import base64
import io
import json
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import numpy as np
import openai
import pytest

from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

TEXT = "The quick brown fox jumps over the lazy dog. It was a sunny day in the park."
LONG_SENTENCES = [
    "Streaming speech should start playing long before the whole text is spoken.",
    "This paragraph has several sentences, so the server can send each as soon as it is ready.",
    "A listener hears the first words while the rest are still being generated.",
    "That is the point of streaming, and this test measures it.",
]
LONG = " ".join(LONG_SENTENCES * 3)


def decoded_seconds(data: bytes) -> float:
    with av.open(io.BytesIO(data)) as container:
        samples = sum(frame.samples for frame in container.decode(audio=0))
        rate = container.streams.audio[0].rate
    return samples / rate


@pytest.mark.one_face
@pytest.mark.parametrize(
    ("fmt", "codec"),
    [("mp3", "mp3"), ("opus", "opus"), ("aac", "aac"), ("flac", "flac"), ("wav", "pcm_s16le")],
)
@pytest.mark.slow
def test_every_format_decodes_to_audio_of_plausible_length(
    client: openai.OpenAI, fmt: str, codec: str
) -> None:
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt)  # type: ignore[arg-type]
    with av.open(io.BytesIO(audio.content)) as container:
        assert container.streams.audio[0].codec_context.name.startswith(codec)
    assert 3 < decoded_seconds(audio.content) < 9


def test_content_types_match_the_formats(server: Faces) -> None:
    expected = {
        "mp3": "audio/mpeg",
        "opus": "audio/ogg",
        "aac": "audio/aac",
        "flac": "audio/flac",
        "wav": "audio/wav",
        "pcm": "audio/pcm",
    }
    for fmt, media_type in expected.items():
        response = httpx.post(
            f"{server.url}/v1/audio/speech",
            json={"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": fmt},
            timeout=60,
        )
        assert response.headers["content-type"] == media_type


def test_voices_are_listed_and_in_the_model_metadata(server: Faces, http_client: openai.OpenAI) -> None:
    voices = httpx.get(f"{server.url}/v1/audio/voices", params={"model": "espeak-ng"}).json()["data"]
    ids = [v["id"] for v in voices]
    assert len(ids) > 100
    assert {"en-us", "fr-fr", "de"} <= set(ids)
    model = http_client.models.retrieve("espeak-ng").model_dump()
    assert model["voices"] == ids
    assert model["capabilities"] == ["speech"]


@pytest.mark.one_face
def test_an_espeak_language_voice_speaks_and_transcribes(client: openai.OpenAI) -> None:
    audio = client.audio.speech.create(model="espeak-ng", voice="en-us", input="Good morning, my friend.")  # type: ignore[arg-type]
    assert 0.8 < decoded_seconds(audio.content) < 4
    french = client.audio.speech.create(model="espeak-ng", voice="fr-fr", input="Bonjour tout le monde.")  # type: ignore[arg-type]
    assert decoded_seconds(french.content) > 0.5


@pytest.mark.one_face
@pytest.mark.slow
def test_speed_changes_duration_for_both_engines(client: openai.OpenAI) -> None:
    for model, voice in (("piper-en-us", "joe"), ("espeak-ng", "en-us")):
        normal = decoded_seconds(client.audio.speech.create(model=model, voice=voice, input=TEXT).content)  # type: ignore[arg-type]
        fast = decoded_seconds(
            client.audio.speech.create(model=model, voice=voice, input=TEXT, speed=2.0).content
        )  # type: ignore[arg-type]
        slow = decoded_seconds(
            client.audio.speech.create(model=model, voice=voice, input=TEXT, speed=0.5).content
        )  # type: ignore[arg-type]
        assert fast < 0.75 * normal < normal < slow / 1.3, (model, fast, normal, slow)


def test_input_over_4096_characters_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="tts-1", voice="alloy", input="a" * 4097)
    assert caught.value.param == "input"


def test_a_sentence_spoken_as_nothing_is_skipped_in_every_format(client: openai.OpenAI) -> None:
    # Piper makes no samples of "...": the sentences around it are still spoken (it was a 500 from FFmpeg).
    for fmt in ("wav", "pcm", "mp3", "opus", "aac", "flac"):
        audio = client.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input="Fine. ... Fine.",
            response_format=fmt,  # type: ignore[arg-type]
        )
        seconds = len(audio.content) / 48_000 if fmt == "pcm" else decoded_seconds(audio.content)
        assert 0.5 < seconds < 4, (fmt, seconds)


@pytest.mark.one_face
def test_instructions_are_accepted(client: openai.OpenAI) -> None:
    audio = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hi.", instructions="Speak cheerfully."
    )
    assert audio.content


@pytest.mark.one_face
@pytest.mark.slow
def test_long_input_is_spoken_whole(http_client: openai.OpenAI) -> None:
    """Over HTTP, where a long answer streams (the in-process face's whole file is checked on short inputs),
    Piper's audio of a long text is as long as its sentences spoken one by one (Piper samples its timing:
    within 1% in trials). That it is those sentences, in their order, is checked on tones, which can be read
    back exactly (below): a transcript is Whisper's words, which skipped a stretch of this 40-s recording
    now and then."""

    def seconds(text: str) -> float:
        audio = http_client.audio.speech.create(
            model="tts-1", voice="alloy", input=text, response_format="wav"
        )
        with wave.open(io.BytesIO(audio.content)) as w:  # streamed over HTTP: count what is there
            return len(w.readframes(w.getnframes())) / w.getsampwidth() / w.getframerate()

    parts = 3 * sum(seconds(sentence) for sentence in LONG_SENTENCES)
    assert 0.95 * parts <= seconds(LONG) <= 1.05 * parts  # one sentence of the 12 is 8%


@pytest.fixture(scope="module")
def tones(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    """A speech model whose every letter is a tone of its own pitch (`tone_speech`: 80 ms, 880 Hz + 10 Hz ×
    the letter's place in the alphabet, with the voice `high`), so what it said is read back exactly."""
    database = str(tmp_path_factory.mktemp("tones") / "state.db")
    with faces(tiny_models(database, "key", tones="tone_speech"), "key") as served:
        yield served


def toned_letters(wav: bytes) -> list[int]:
    """The letters a tones WAV says, each as its place in the alphabet (`ord(letter) % 32`)."""
    with wave.open(io.BytesIO(wav)) as w:
        rate, pcm = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    step = rate * 8 // 100
    places = []
    for start in range(0, len(pcm) - step + 1, step):
        middle = pcm[start + step // 8 : start + 7 * step // 8].astype(np.float32)
        spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle)), n=1 << 15))
        places.append(round((np.argmax(spectrum) * rate / (1 << 15) - 880) / 10))
    return places


def test_a_long_input_is_spoken_whole_and_in_order_as_it_streams(tones: Faces) -> None:
    """A long text is cut into sentences, and a sentence past the 400 characters a piece may hold at its
    commas; over HTTP the pieces stream as each is synthesised. Every letter is heard, once, in order."""
    text = "Every letter here is a tone of its own pitch. " * 3 + "One clause, " * 40 + "and its end. Quiet!"
    assert max(len(sentence) for sentence in text.split(". ")) > 400
    audio = tones.http.audio.speech.create(model="tones", voice="high", input=text, response_format="wav")
    assert toned_letters(audio.content) == [ord(c) % 32 for c in text if c.isalpha()]


@pytest.mark.slow
def test_streamed_audio_starts_before_the_whole_synthesis(server: Faces, http_client: openai.OpenAI) -> None:
    started = time.perf_counter()
    http_client.audio.speech.create(model="tts-1", voice="alloy", input=LONG, response_format="pcm")
    whole = time.perf_counter() - started
    started = time.perf_counter()
    chunks = []
    # No `stream_format`: OpenAI's default is `audio`, so a plain streaming read gets audio as it is made.
    with http_client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=LONG, response_format="pcm"
    ) as response:
        for chunk in response.iter_bytes():
            if not chunks:
                first = time.perf_counter() - started
            chunks.append(chunk)
    assert first < whole / 2, (first, whole)
    samples = np.frombuffer(b"".join(chunks), dtype="<i2")
    assert len(samples) / 24000 > 10


def test_a_streamed_wav_reads_whole_with_the_wave_module(http_client: openai.OpenAI) -> None:
    # Sent before its length is known, the header carries the streaming sizes (0xFFFFFFFF), as OpenAI's
    # does; `wave` and FFmpeg still read every frame.
    audio = http_client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav")
    with wave.open(io.BytesIO(audio.content)) as reader:
        frames = reader.readframes(reader.getnframes())
        assert (reader.getframerate(), reader.getnchannels(), reader.getsampwidth()) == (24000, 1, 2)
    assert len(frames) / 2 / 24000 == pytest.approx(decoded_seconds(audio.content), abs=0.01)


def test_in_process_whole_wav_has_exact_sizes(inprocess_client: openai.OpenAI) -> None:
    audio = inprocess_client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="wav"
    )
    with wave.open(io.BytesIO(audio.content)) as reader:
        assert reader.getnframes() / 24000 == pytest.approx(decoded_seconds(audio.content), abs=0.01)


@pytest.mark.parametrize("fmt", ["mp3", "wav", "opus"])
@pytest.mark.slow
def test_stream_to_file_writes_a_decodable_file(client: openai.OpenAI, tmp_path: Path, fmt: str) -> None:
    target = tmp_path / f"speech.{fmt}"
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="alloy",
        input=TEXT,
        response_format=fmt,  # type: ignore[arg-type]
    ) as response:
        response.stream_to_file(target)
    assert 3 < decoded_seconds(target.read_bytes()) < 9


def test_sse_stream_sends_deltas_then_done(server: Faces) -> None:
    body = {
        "model": "tts-1",
        "voice": "alloy",
        "input": TEXT,
        "response_format": "pcm",
        "stream_format": "sse",
    }
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    assert events[-1]["type"] == "speech.audio.done"
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert 3 < len(pcm) / 2 / 24000 < 9


def test_sse_speech_is_read_through_the_sdk_as_its_bytes(client: openai.OpenAI, tmp_path: Path) -> None:
    """The SDK reads speech as bytes whatever its `stream_format` (`HttpxBinaryResponseContent`), the
    in-process client as over HTTP."""
    answer = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello there.", response_format="pcm", stream_format="sse"
    )
    events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
    answer.write_to_file(tmp_path / "events.txt")
    assert (tmp_path / "events.txt").read_bytes() == answer.content


def test_two_in_process_clients_both_get_espeak_audio(inprocess_client: openai.OpenAI) -> None:
    # libespeak-ng has one synth callback per process: a second client must not steal the first one's audio.
    import modelport

    def hello(client: openai.OpenAI) -> int:
        return len(
            client.audio.speech.create(
                model="espeak-ng", voice="en-us", input="Hello.", response_format="pcm"
            ).content
        )  # type: ignore[arg-type]

    before = hello(inprocess_client)
    with modelport.OpenAI() as second:
        theirs = hello(second)
    ours = hello(inprocess_client)
    assert before > 4800  # over 0.1 s at 24 kHz, 16-bit
    assert abs(ours - before) < before / 10
    assert abs(theirs - before) < before / 10


@pytest.mark.models  # loads Piper itself, with no shared fixture to mark it
def test_a_piper_voice_without_variation_says_a_text_the_same_way_every_time() -> None:
    import modelport
    from modelport.settings import ModelConfig, Settings

    models = [
        ModelConfig(id="steady", engine="piper", noise_scale=0, noise_w_scale=0),
        ModelConfig(id="lively", engine="piper"),
        ModelConfig(id="wrong", engine="piper", noise_scale=-1),
    ]

    def said(client: openai.OpenAI, model: str) -> bytes:
        return client.audio.speech.create(
            model=model, voice="alloy", input="Hello there.", response_format="pcm"
        ).content

    with modelport.OpenAI(settings=Settings(defaults=False, models=models)) as client:
        assert said(client, "steady") == said(client, "steady")
        assert said(client, "lively") != said(client, "lively")  # drawn afresh for every call
        with pytest.raises(openai.APIStatusError) as refused:
            said(client, "wrong")
    assert "`noise_scale` is -1" in refused.value.message
