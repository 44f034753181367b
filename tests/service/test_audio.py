"""Speech (Piper) and transcription (Whisper tiny.en), over HTTP and in-process."""

from __future__ import annotations

import io
import re
import wave

import av
import numpy as np
import openai
import pytest
from openai.types.audio import Transcription

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please bring me a cup of hot coffee in the morning.",
]


# Piper samples its prosody and whisper tiny mishears some of it: "a cup" is heard as "the cup" in 9 of
# 12 runs, and one CI run lost a second word besides. Nonsense or silence scores near 1.0.
TWO_WORDS_IN_A_SENTENCE = 0.2


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def word_error_rate(reference: str, hypothesis: str) -> float:
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(len(ref), 1)


@pytest.mark.one_face
def test_wav_is_a_valid_24khz_mono_file_of_plausible_length(client: openai.OpenAI) -> None:
    audio = client.audio.speech.create(
        model="tts-1", voice="alloy", input=SENTENCES[0], response_format="wav"
    )
    with wave.open(io.BytesIO(audio.content)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)
        seconds = len(w.readframes(w.getnframes())) / 2 / w.getframerate()  # streamed: sizes unknown
    assert 1.5 < seconds < 6


@pytest.mark.one_face
def test_pcm_is_raw_24khz_16bit_and_speed_shortens_it(client: openai.OpenAI) -> None:
    normal = client.audio.speech.create(
        model="piper-en-us", voice="joe", input=SENTENCES[1], response_format="pcm"
    )
    fast = client.audio.speech.create(
        model="piper-en-us", voice="joe", input=SENTENCES[1], response_format="pcm", speed=2.0
    )
    assert len(normal.content) % 2 == 0
    samples = np.frombuffer(normal.content, dtype="<i2")
    assert 1.5 < len(samples) / 24000 < 8
    assert np.abs(samples).max() > 1000  # real speech, not silence
    # Piper's length scale rounds each phoneme to whole frames, so 2x speed gives about 0.66x the duration.
    assert 0.4 < len(fast.content) / len(normal.content) < 0.75


def test_speech_result_behaves_like_the_sdk_binary_response(client: openai.OpenAI, tmp_path) -> None:  # type: ignore[no-untyped-def]
    audio = client.audio.speech.create(model="tts-1", voice="nova", input="Hello.", response_format="wav")
    target = tmp_path / "hello.wav"
    audio.write_to_file(target)
    assert target.read_bytes() == audio.content == audio.read()


@pytest.mark.one_face
@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.slow
def test_speech_round_trips_through_transcription(client: openai.OpenAI, sentence: str) -> None:
    audio = client.audio.speech.create(model="tts-1", voice="echo", input=sentence, response_format="wav")
    result = client.audio.transcriptions.create(model="whisper-1", file=("speech.wav", audio.content))
    assert isinstance(result, Transcription)
    assert word_error_rate(sentence, result.text) <= TWO_WORDS_IN_A_SENTENCE, result.text
    assert result.usage is not None
    assert result.usage.type == "duration"


@pytest.mark.one_face
@pytest.mark.slow
def test_transcription_of_a_compressed_file_as_text(client: openai.OpenAI) -> None:
    mp3 = client.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCES[0], response_format="mp3")
    with av.open(io.BytesIO(mp3.content)) as container:
        assert container.format.name == "mp3"
    text = client.audio.transcriptions.create(
        model="whisper-tiny-en", file=("speech.mp3", mp3.content), response_format="text"
    )
    assert isinstance(text, str)
    assert word_error_rate(SENTENCES[0], text) <= TWO_WORDS_IN_A_SENTENCE, text


def test_an_unknown_voice_is_a_400_listing_the_voices(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="tts-1", voice="nobody", input="Hi.")  # type: ignore[arg-type]
    assert caught.value.param == "voice"
    assert "joe" in caught.value.message


def test_speed_out_of_range_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", speed=5)
    assert caught.value.param == "speed"


def test_a_file_that_is_not_audio_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(model="whisper-1", file=("notes.wav", b"this is not audio" * 50))
    assert caught.value.param == "file"
