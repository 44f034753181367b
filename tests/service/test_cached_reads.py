"""Values the store is asked for on every request, read ahead so that steady traffic never waits for it,
and never trusted past their time."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from modelport.service.access import cached_reads
from modelport.service.access.cached_reads import ReadAhead


class Store:
    """A value that changes, whose reads wait until `open` is set (as reads wait on a busy machine)."""

    def __init__(self) -> None:
        self.value = "first"
        self.reads = 0
        self.open = asyncio.Event()
        self.open.set()
        self.fail = False

    async def read(self, key: str) -> str:
        self.reads += 1
        await self.open.wait()
        if self.fail:
            raise OSError("the store is down")
        return f"{key}:{self.value}"


def test_callers_wanting_one_key_share_one_read() -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 10.0, cap=100)
        store.open.clear()
        waiting = [asyncio.ensure_future(cache.get("k")) for _ in range(20)]
        await asyncio.sleep(0.01)
        store.open.set()
        assert set(await asyncio.gather(*waiting)) == {"k:first"}
        assert store.reads == 1

    asyncio.run(run())


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The cache's clock, which the test moves: slept through on a busy machine, 0.12 s of a 0.2-s life
    once overshot the whole of it, and the value was (rightly) waited for."""
    now = [100.0]
    monkeypatch.setattr(cached_reads, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_past_half_its_life_a_value_is_served_at_once_and_read_again_beside(clock: list[float]) -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 0.2, cap=100)
        assert await cache.get("k") == "k:first"
        clock[0] += 0.12  # past half of 0.2 s
        store.value, store.reads = "second", 0
        store.open.clear()  # the store is slow now: a value waited for would not come
        assert await asyncio.wait_for(cache.get("k"), 1.0) == "k:first"
        assert await asyncio.wait_for(cache.get("k"), 1.0) == "k:first"
        assert store.reads == 1  # one read beside, however many requests found the value old
        store.open.set()
        await asyncio.sleep(0.01)
        assert await cache.get("k") == "k:second"

    asyncio.run(run())


def test_past_its_whole_life_a_value_is_waited_for() -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 0.1, cap=100)
        assert await cache.get("k") == "k:first"
        store.value = "revoked"
        await asyncio.sleep(0.15)
        assert await cache.get("k") == "k:revoked"  # the change is seen within the value's life

    asyncio.run(run())


def test_a_read_begun_before_forget_is_not_kept_after_it() -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 10.0, cap=100)
        store.open.clear()
        before = asyncio.ensure_future(cache.get("k"))
        await asyncio.sleep(0.01)
        store.value = "changed here"
        cache.forget()
        after = asyncio.ensure_future(cache.get("k"))
        store.open.set()
        await before
        assert await after == "k:changed here"
        assert store.reads == 2  # the request after the change did not join the read begun before it

    asyncio.run(run())


def test_a_failed_read_beside_keeps_the_value_until_its_time_then_the_error_is_seen(
    clock: list[float],
) -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 0.2, cap=100)
        assert await cache.get("k") == "k:first"
        clock[0] += 0.12
        store.fail = True
        assert await cache.get("k") == "k:first"  # the read beside it fails, unseen
        await asyncio.sleep(0.01)
        clock[0] += 0.1
        with pytest.raises(OSError, match="down"):
            await cache.get("k")

    asyncio.run(run())


def test_a_cancelled_caller_leaves_the_read_to_the_others() -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 10.0, cap=100)
        store.open.clear()
        leaving, staying = asyncio.ensure_future(cache.get("k")), asyncio.ensure_future(cache.get("k"))
        await asyncio.sleep(0.01)
        leaving.cancel()
        store.open.set()
        assert await staying == "k:first"
        assert store.reads == 1

    asyncio.run(run())


def test_past_its_cap_the_cache_starts_again() -> None:
    async def run() -> None:
        store = Store()
        cache = ReadAhead(store.read, lambda: 10.0, cap=3)
        for key in "abcd":
            await cache.get(key)
        assert cache.known("a") is None
        assert cache.known("d") == "d:first"

    asyncio.run(run())
