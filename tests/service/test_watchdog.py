"""The watchdog logs a call that has stopped making progress, with what it waits on."""

from __future__ import annotations

import logging
import threading
import time

import pytest

import modelport
from modelport.service import watchdog
from modelport.settings import ModelConfig, Settings
from tests.predictors import tiny_models


def test_a_stalled_stream_is_logged_with_what_it_waits_on(caplog: pytest.LogCaptureFixture) -> None:
    models = [ModelConfig(id="stuck", predictor="tests.predictors.tiny_models:stuck_chat")]
    client = modelport.OpenAI(settings=Settings(defaults=False, models=models, store={"url": "none"}))
    tiny_models.STUCK.clear()
    said: list[str] = []

    def read() -> None:
        stream = client.chat.completions.create(
            model="stuck", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        said.extend(c.choices[0].delta.content or "" for c in stream if c.choices)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not [p for p in watchdog.stalled(time.monotonic() + watchdog.STALLED) if p.items]:
            assert time.monotonic() < deadline, "the stream never began"
            time.sleep(0.05)
        with caplog.at_level(logging.WARNING, logger="modelport.watchdog"):
            assert watchdog.report(time.monotonic() + watchdog.STALLED) == 1
            assert watchdog.report(time.monotonic() + watchdog.STALLED) == 0  # told once per stall
        # The watchdog's own lines: another test's leftovers may log beside them (asyncio's "Task was
        # destroyed but it is pending!", when the garbage collector finds one here).
        (record,) = [r for r in caplog.records if r.name == "modelport.watchdog"]
        assert "stuck_chat" in record.getMessage()
        assert "model stuck" in record.getMessage()
        assert "the predictor's next item" in record.getMessage()
        assert "1 items so far" in record.getMessage()
        assert "slots: 1 of 1 in use" in record.getMessage()
    finally:
        tiny_models.STUCK.set()
        reader.join(30)
        client.close()
    assert "".join(said) == "waited"
    assert not watchdog.stalled(time.monotonic() + watchdog.STALLED)  # nothing in flight is left watched
