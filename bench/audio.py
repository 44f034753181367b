"""Benchmark 4: real-time factors (seconds of work per second of audio; lower is faster) of speech and
transcription — modelport over HTTP vs each engine called directly, on the same text and audio.

    .venv/bin/python -m bench.audio [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable
from typing import Any

import av
import numpy as np
import openai

from bench.common import machine, median, modelport_server, table
from modelport.engines import espeak, faster_whisper, piper

TEXT = (
    "The museum opens at nine and closes late on Fridays. Our neighbours planted tomatoes, beans and "
    "sunflowers this spring. A heavy storm delayed every train leaving the northern station. She finished "
    "the report before lunch and went for a long swim."
)
CONFIG = """defaults = false
[[models]]
id = "piper-en-us"
engine = "piper"
[[models]]
id = "espeak-ng"
engine = "espeak-ng"
[[models]]
id = "whisper-tiny-en"
engine = "faster-whisper"
"""


def timed(runs: int, call: Callable[[], Any]) -> float:
    call()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return median(times)


def decoded_seconds(wav: bytes) -> float:
    with av.open(io.BytesIO(wav)) as container:
        stream = container.streams.audio[0]
        return sum(frame.samples for frame in container.decode(stream)) / stream.rate


def main(runs: int) -> None:
    print(f"# Audio real-time factors, median of {runs}\n\n{machine()}")
    (piper_speak,) = piper.load()
    (espeak_speak,) = espeak.load()
    (transcribe,) = faster_whisper.load()
    rows = []
    with modelport_server(CONFIG) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="bench", max_retries=0, timeout=600)
        wav = client.audio.speech.create(model="piper-en-us", voice="joe", input=TEXT, response_format="wav")
        audio = wav.content
        for model, voice, direct in (
            ("piper-en-us", "joe", piper_speak),
            ("espeak-ng", "en-us", espeak_speak),
        ):
            seconds = decoded_seconds(
                client.audio.speech.create(
                    model=model, voice=voice, input=TEXT, response_format="wav"
                ).content
            )
            engine = timed(runs, lambda d=direct, v=voice: d(TEXT, v))
            served = timed(
                runs,
                lambda m=model, v=voice: (
                    client.audio.speech.create(model=m, voice=v, input=TEXT, response_format="wav").content
                ),
            )
            rows.append([f"speech, {model}", seconds, engine / seconds, served / seconds, served / engine])

        with av.open(io.BytesIO(audio)) as container:
            resampler = av.AudioResampler(format="flt", layout="mono", rate=16000)
            pcm = np.concatenate(
                [
                    out.to_ndarray().reshape(-1)
                    for frame in container.decode(audio=0)
                    for out in resampler.resample(frame)
                ]
            )
        seconds = len(pcm) / 16000
        engine = timed(runs, lambda: list(transcribe(pcm).segments))
        served = timed(
            runs,
            lambda: client.audio.transcriptions.create(
                model="whisper-tiny-en", file=("speech.wav", audio, "audio/wav")
            ),
        )
        rows.append(
            ["transcription, whisper-tiny-en", seconds, engine / seconds, served / seconds, served / engine]
        )
    headers = ["", "audio s", "RTF engine directly", "RTF modelport HTTP", "modelport / engine time"]
    print(table("Real-time factors", headers, rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    main(parser.parse_args().runs)
