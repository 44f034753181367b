"""A short soak on loopback (32 clients mixing every endpoint, some leaving streams early, some sending bad
requests): no 5xx, no hang, and the server answers normally afterwards. `python -m bench.soak` runs the
long one with latencies and memory."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from bench.soak import server_side, soak
from tests.support.faces import Faces

pytestmark = pytest.mark.slow  # 10 s of load, then the requests in flight (~15 s at 32 clients on 2 cores)


def test_thirty_two_clients_mixing_every_endpoint_get_no_5xx_and_no_hang(server: Faces) -> None:
    tally = asyncio.run(soak(server.url, server.pid, clients=32, seconds=10))
    assert tally.hangs == 0
    answered = {status for by_kind in tally.statuses.values() for status in by_kind}
    assert all(status < 500 for status in answered), dict(tally.statuses)
    assert len(tally.latencies) >= 6  # most kinds were exercised
    assert httpx.get(f"{server.url}/v1/models").status_code == 200
    # The bench reads the server's own latencies of the cheap kinds from its histogram.
    assert "models: " in server_side(server.url)
