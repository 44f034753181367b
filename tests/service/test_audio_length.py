"""Audio to transcribe is bounded by its length (`[limits] audio_seconds`), and a file is decoded no further
than that bound: a few MB of FLAC can hold days of silence, tens of GB once decoded."""

from __future__ import annotations

import io
import tracemalloc

import av
import numpy as np
import openai
import pytest

import modelport
from modelport.predictors.registry import ModelRegistry
from modelport.service import Service
from modelport.settings import Limits, Settings
from tests.predictors.tiny_models import loudness_transcriber

RATE = 8000  # the tiny transcriber's


def silence(seconds: int) -> bytes:
    """A FLAC file of `seconds` of silence: a few hundred bytes a minute."""
    out = io.BytesIO()
    with av.open(out, "w", format="flac") as container:
        stream = container.add_stream("flac", rate=RATE, layout="mono")
        total, step = seconds * RATE, 65536
        for start in range(0, total, step):
            zeros = np.zeros((1, min(step, total - start)), np.int16)
            frame = av.AudioFrame.from_ndarray(zeros, format="s16", layout="mono")
            frame.sample_rate, frame.pts = RATE, start
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return out.getvalue()


@pytest.fixture(scope="module")
def transcribing() -> modelport.OpenAI:
    registry = ModelRegistry()
    registry.add_predictor("loudness", loudness_transcriber)
    return modelport.OpenAI(service=Service(registry, Settings(limits=Limits(audio_seconds=60))))


def test_audio_within_the_bound_is_transcribed(transcribing: modelport.OpenAI) -> None:
    heard = transcribing.audio.transcriptions.create(
        model="loudness", file=("quiet.flac", silence(50)), response_format="verbose_json"
    )
    assert heard.duration == pytest.approx(50, abs=0.1)


def test_audio_past_the_bound_is_a_400_decoded_no_further_than_it(transcribing: modelport.OpenAI) -> None:
    bomb = silence(20 * 60)  # 20 minutes: 38 MB once decoded at its rate, as float32
    assert len(bomb) < 300_000
    tracemalloc.start()
    try:
        with pytest.raises(openai.BadRequestError) as refused:
            transcribing.audio.transcriptions.create(model="loudness", file=("quiet.flac", bomb))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.code == "audio_too_long"
    assert refused.value.param == "file"
    assert "60 s" in refused.value.message
    # The bound's 60 s are 1.9 MB of samples; the whole file would have been 38 MB, then copied into one.
    assert peak < 12_000_000, peak
