"""Transcription and translation in every response format, streaming, uploads of every common format."""

from __future__ import annotations

import io
import json
import re

import av
import httpx
import numpy as np
import openai
import pytest
from openai.types.audio import TranscriptionVerbose, Translation

from modelport.settings import DEFAULT_TRANSCRIPTION
from tests.service.test_audio import TWO_WORDS_IN_A_SENTENCE, word_error_rate
from tests.support.faces import Faces
from tests.support.wav import wav

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "We walked along the river after dinner.",
    "Please call me back as soon as you can.",
    "My brother bought a new red bicycle.",
]
PARAGRAPH = " ".join(SENTENCES)


@pytest.fixture(scope="module")
def paragraph_wav(inprocess_client: openai.OpenAI) -> bytes:
    return inprocess_client.audio.speech.create(
        model="tts-1", voice="alloy", input=PARAGRAPH, response_format="wav"
    ).content


def reencode(wav: bytes, container_format: str, codec: str, rate: int = 24000) -> bytes:
    out = io.BytesIO()
    with av.open(io.BytesIO(wav)) as source, av.open(out, "w", format=container_format) as target:
        stream = target.add_stream(codec, rate=rate, layout="mono")
        resampler = av.AudioResampler(
            format=stream.codec_context.codec.audio_formats[0].name, layout="mono", rate=rate
        )
        fifo = av.AudioFifo()
        for frame in source.decode(audio=0):
            for converted in resampler.resample(frame):
                converted.pts = None
                fifo.write(converted)
        size = stream.codec_context.frame_size or 1024
        while fifo.samples:
            target.mux(stream.encode(fifo.read(min(size, fifo.samples))))
        target.mux(stream.encode(None))
    return out.getvalue()


@pytest.mark.one_face
@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.slow
def test_round_trip_word_error_rate(client: openai.OpenAI, sentence: str) -> None:
    audio = client.audio.speech.create(
        model="piper-en-us", voice="joe", input=sentence, response_format="flac"
    )
    text = client.audio.transcriptions.create(
        model="whisper-1", file=("s.flac", audio.content), response_format="text"
    )
    assert word_error_rate(sentence, text) <= TWO_WORDS_IN_A_SENTENCE, text


@pytest.mark.one_face
@pytest.mark.parametrize(
    ("name", "container", "codec"),
    [("m4a", "mp4", "aac"), ("webm", "webm", "libopus"), ("ogg", "ogg", "libopus"), ("flac", "flac", "flac")],
)
@pytest.mark.slow
def test_common_upload_formats(
    client: openai.OpenAI, paragraph_wav: bytes, name: str, container: str, codec: str
) -> None:
    rate = 48000 if codec == "libopus" else 24000
    data = reencode(paragraph_wav, container, codec, rate)
    text = client.audio.transcriptions.create(
        model="whisper-1", file=(f"speech.{name}", data), response_format="text"
    )
    assert word_error_rate(PARAGRAPH, text) <= 0.1, text


def srt_times(text: str) -> list[tuple[float, float]]:
    def seconds(stamp: str) -> float:
        h, m, s = stamp.replace(",", ".").split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)

    return [(seconds(a), seconds(b)) for a, b in re.findall(r"([\d:,.]+) --> ([\d:,.]+)", text)]


@pytest.mark.one_face
@pytest.mark.parametrize("fmt", ["srt", "vtt"])
@pytest.mark.slow
def test_subtitles_parse_with_increasing_times_inside_the_duration(
    client: openai.OpenAI, paragraph_wav: bytes, fmt: str
) -> None:
    text = client.audio.transcriptions.create(
        model="whisper-1", file=("p.wav", paragraph_wav), response_format=fmt
    )  # type: ignore[call-overload]
    assert isinstance(text, str)
    if fmt == "vtt":
        assert text.startswith("WEBVTT\n\n")
    else:
        assert text.startswith("1\n")
    times = srt_times(text)
    assert times
    duration = len(paragraph_wav) / 2 / 24000
    flat = [t for pair in times for t in pair]
    assert flat == sorted(flat)
    assert all(start < end for start, end in times)
    assert flat[-1] <= duration + 0.5


@pytest.mark.one_face
@pytest.mark.slow
def test_verbose_json_has_language_duration_segments_and_words(
    client: openai.OpenAI, paragraph_wav: bytes
) -> None:
    result = client.audio.transcriptions.create(
        model="whisper-1",
        file=("p.wav", paragraph_wav),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert isinstance(result, TranscriptionVerbose)
    assert result.language == "english"
    assert abs(result.duration - len(paragraph_wav) / 2 / 24000) < 0.1
    assert result.segments
    for segment in result.segments:
        assert segment.avg_logprob <= 0
        assert 0 <= segment.no_speech_prob <= 1
    assert result.words is not None
    assert len(result.words) >= len(PARAGRAPH.split()) - 2
    starts = [w.start for w in result.words]
    assert starts == sorted(starts)
    assert all(w.start <= w.end <= result.duration + 0.5 for w in result.words)
    assert word_error_rate(PARAGRAPH, " ".join(w.word for w in result.words)) <= 0.1


@pytest.mark.slow
def test_streamed_transcription_deltas_make_the_final_text(
    client: openai.OpenAI, paragraph_wav: bytes
) -> None:
    events = list(
        client.audio.transcriptions.create(model="whisper-1", file=("p.wav", paragraph_wav), stream=True)
    )
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    done = events[-1]
    assert done.type == "transcript.text.done"
    assert deltas
    assert "".join(d.delta for d in deltas).strip() == done.text
    assert word_error_rate(PARAGRAPH, done.text) <= 0.1


@pytest.mark.one_face
@pytest.mark.slow
def test_prompt_and_language_are_accepted(client: openai.OpenAI, paragraph_wav: bytes) -> None:
    result = client.audio.transcriptions.create(
        model="whisper-1",
        file=("p.wav", paragraph_wav),
        language="en",
        prompt="Tongue twisters.",
        temperature=0,
    )
    assert word_error_rate(PARAGRAPH, result.text) <= 0.15


@pytest.mark.one_face
@pytest.mark.slow
def test_silence_is_skipped_by_voice_activity_detection(client: openai.OpenAI, paragraph_wav: bytes) -> None:
    with av.open(io.BytesIO(paragraph_wav)) as container:
        speech = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
    silence = np.zeros(24000 * 20, dtype=np.int16)
    padded = np.concatenate([silence, speech, silence]).astype("<i2")
    result = client.audio.transcriptions.create(
        model="whisper-1", file=("padded.wav", wav(padded.tobytes(), 24000)), response_format="verbose_json"
    )
    assert result.segments
    assert result.segments[0].start >= 15  # times refer to the original audio, after the skipped silence
    assert word_error_rate(PARAGRAPH, result.text) <= 0.1


def test_translation_on_an_english_only_model_is_a_400_naming_the_capability(
    client: openai.OpenAI, paragraph_wav: bytes
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.translations.create(model=DEFAULT_TRANSCRIPTION, file=("p.wav", paragraph_wav))
    assert "translation" in caught.value.message
    assert caught.value.param == "model"
    # `whisper-1`, OpenAI's one translation model (so what every client of OpenAI's sends), reaches the
    # multilingual default instead of the English-only transcription default it reaches elsewhere.
    translated = client.audio.translations.create(model="whisper-1", file=("p.wav", paragraph_wav))
    assert translated.text.strip()
    assert isinstance(translated, Translation)  # the in-process client's too, not a `Transcription`


def test_diarization_is_refused_by_name_with_the_model_that_does_it(
    client: openai.OpenAI, paragraph_wav: bytes
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(
            model="gpt-4o-transcribe-diarize", file=("p.wav", paragraph_wav), response_format="diarized_json"
        )
    assert caught.value.param == "response_format"
    assert "diarization" in caught.value.message


@pytest.mark.parametrize(
    "junk", [b"", b"RIFF\x00\x00\x00\x00WAVEfmt " + b"\x00" * 40, bytes(range(256)) * 20]
)
def test_corrupt_or_empty_files_are_400s(client: openai.OpenAI, junk: bytes) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(model="whisper-1", file=("bad.wav", junk))
    assert caught.value.param == "file"


def test_an_oversized_upload_is_a_413(server: Faces) -> None:
    response = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        data={"model": "whisper-1"},
        files={"file": ("big.wav", b"\x00" * (25 * 1024 * 1024 + 1), "audio/wav")},
        timeout=60,
    )
    assert response.status_code == 413
    assert response.json()["error"]["param"] == "file"


def test_streamed_transcription_over_http_is_sse(server: Faces, paragraph_wav: bytes) -> None:
    with httpx.stream(
        "POST",
        f"{server.url}/v1/audio/transcriptions",
        data={"model": "whisper-1", "stream": "true"},
        files={"file": ("p.wav", paragraph_wav, "audio/wav")},
        timeout=60,
    ) as response:
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert json.loads(data[-2])["type"] == "transcript.text.done"


@pytest.fixture(scope="module")
def german_wav(inprocess_client: openai.OpenAI) -> bytes:
    return inprocess_client.audio.speech.create(
        model="espeak-ng",
        voice="de",  # type: ignore[arg-type]
        input="Ich habe heute keine Zeit, aber morgen komme ich gerne.",
        response_format="wav",
    ).content


@pytest.mark.one_face
@pytest.mark.slow
def test_the_multilingual_model_transcribes_german(client: openai.OpenAI, german_wav: bytes) -> None:
    result = client.audio.transcriptions.create(
        model="whisper-base", file=("de.wav", german_wav), response_format="verbose_json"
    )
    assert result.language == "german"
    assert {"heute", "keine", "zeit", "morgen"} <= set(re.findall(r"\w+", result.text.lower()))


@pytest.mark.one_face
@pytest.mark.slow
def test_the_multilingual_model_translates_german_to_english(
    client: openai.OpenAI, german_wav: bytes
) -> None:
    result = client.audio.translations.create(model="whisper-base", file=("de.wav", german_wav))
    assert {"time", "today"} <= set(re.findall(r"\w+", result.text.lower())), result.text


def test_an_unknown_language_is_a_400(client: openai.OpenAI, german_wav: bytes) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(model="whisper-base", file=("de.wav", german_wav), language="xx")
    assert caught.value.param == "language"
