"""Audio figures over HTTP with the openai SDK: time to first streamed audio, real-time factors, formats,
round-trip word error rates. Start a server first: `.venv/bin/modelport serve --port 8011`, then
`.venv/bin/python scripts/audio_figures.py`."""

import io
import re
import statistics
import time

import av
import httpx
import openai

URL = "http://127.0.0.1:8011/v1"
c = openai.OpenAI(base_url=URL, api_key="x")
SENT = [
    "The quick brown fox jumps over the lazy dog.",
    "We walked along the river after dinner.",
    "Please call me back as soon as you can.",
    "My brother bought a new red bicycle.",
]
LONG = (
    " ".join(SENT) + " The museum opens at nine and closes late on Fridays."
    " Our neighbours planted tomatoes, beans and sunflowers this spring."
    " A heavy storm delayed every train leaving the northern station."
    " She finished the report before lunch and went for a long swim."
)


def secs(data):
    with av.open(io.BytesIO(data)) as f:
        return sum(fr.samples for fr in f.decode(audio=0)) / f.streams.audio[0].rate


def words(t):
    return re.findall(r"[a-z0-9']+", t.lower())


def wer(r, h):
    r, h = words(r), words(h)
    row = list(range(len(h) + 1))
    for i, a in enumerate(r, 1):
        prev, row[0] = row[0], i
        for j, b in enumerate(h, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (a != b))
    return row[-1] / len(r)


for model, voice in (("piper-en-us", "joe"), ("espeak-ng", "en-us")):
    t = time.perf_counter()
    whole = c.audio.speech.create(model=model, voice=voice, input=LONG, response_format="wav").content
    dt = time.perf_counter() - t
    d = secs(whole)
    t = time.perf_counter()
    first = None
    with httpx.stream(
        "POST",
        f"{URL}/audio/speech",
        json={
            "model": model,
            "voice": voice,
            "input": LONG,
            "response_format": "pcm",
            "stream_format": "audio",
        },
        timeout=60,
    ) as r:
        for chunk in r.iter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - t
    print(
        f"speech {model}: {d:.1f}s audio in {dt:.2f}s (RTF {dt / d:.3f}); "
        f"streamed first audio {first:.2f}s vs whole {dt:.2f}s"
    )
for fmt in ("mp3", "opus", "aac", "flac", "wav"):
    data = c.audio.speech.create(model="tts-1", voice="alloy", input=SENT[0], response_format=fmt).content
    print(f"format {fmt}: {len(data)} bytes, decodes to {secs(data):.2f}s")
speech = c.audio.speech.create(model="piper-en-us", voice="joe", input=LONG, response_format="wav").content
d = secs(speech)
for model in ("whisper-tiny-en", "whisper-base"):
    ts = []
    for _ in range(3):
        t = time.perf_counter()
        text = c.audio.transcriptions.create(model=model, file=("s.wav", speech), response_format="text")
        ts.append(time.perf_counter() - t)
    print(
        f"transcription {model}: {d:.1f}s audio, median {statistics.median(ts):.2f}s "
        f"(RTF {statistics.median(ts) / d:.3f}), WER {wer(LONG, text):.3f}"
    )
for model, voice in (("piper-en-us", "joe"), ("espeak-ng", "en-us")):
    w = []
    for s in SENT:
        a = c.audio.speech.create(model=model, voice=voice, input=s, response_format="flac").content
        w.append(
            wer(
                s,
                c.audio.transcriptions.create(
                    model="whisper-tiny-en", file=("s.flac", a), response_format="text"
                ),
            )
        )
    print(
        f"round trip {model} -> whisper-tiny-en: "
        f"per-sentence WER {[round(x, 3) for x in w]}, mean {statistics.mean(w):.3f}"
    )
