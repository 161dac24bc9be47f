"""Window work ends with its caller: a walk nobody waits for is stopped inside, not left to run.

A pool of one worker: a walk that would run for ever (pure Python, as a
plan's walk is) is stopped when its caller is cancelled or its time runs
out, and the next session's planning gets the worker at once. A walk that
finishes normally is untouched by a stop that comes after it, and a walk
stopped before it started never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sidecar.engine.window_work import WindowWork


def _forever(started: threading.Event, finished: list[str]) -> None:
    started.set()
    try:
        n = 0
        while True:
            n += 1
    finally:
        finished.append("stopped")


async def test_a_cancelled_caller_stops_its_walk_and_frees_the_worker() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    work = WindowWork(pool, timeout_s=600)
    started = threading.Event()
    finished: list[str] = []
    caller = asyncio.ensure_future(work.run(_forever, started, finished))
    await asyncio.to_thread(started.wait, 10)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    # The only worker is free again: the next walk runs and answers.
    assert await asyncio.wait_for(work.run(lambda: 42), 10) == 42
    assert finished == ["stopped"]
    pool.shutdown(wait=True)


async def test_a_walk_past_its_time_is_stopped() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    work = WindowWork(pool, timeout_s=0.2)
    finished: list[str] = []
    with pytest.raises(TimeoutError, match=r"planning the pass took longer than 0\.2 s"):
        await work.run(_forever, threading.Event(), finished)
    assert await asyncio.wait_for(work.run(lambda: "next"), 10) == "next"
    assert finished == ["stopped"]
    pool.shutdown(wait=True)


async def test_a_walk_stopped_before_it_starts_never_runs() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    work = WindowWork(pool, timeout_s=600)
    started = threading.Event()
    finished: list[str] = []
    blocker = asyncio.ensure_future(work.run(_forever, started, finished))
    await asyncio.to_thread(started.wait, 10)
    ran: list[int] = []
    queued = asyncio.ensure_future(work.run(ran.append, 1))
    await asyncio.sleep(0.05)
    queued.cancel()
    blocker.cancel()
    for task in (queued, blocker):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert await asyncio.wait_for(work.run(lambda: "after"), 10) == "after"
    assert ran == []
    pool.shutdown(wait=True)


async def test_many_walks_that_end_on_their_own_are_never_stopped_late() -> None:
    """A stop that comes as a walk returns never lands in the pool's own code."""
    pool = ThreadPoolExecutor(max_workers=2)
    work = WindowWork(pool, timeout_s=600)

    def short(n: int) -> int:
        deadline = time.perf_counter() + 0.001
        while time.perf_counter() < deadline:
            pass
        return n

    for round_ in range(200):
        task = asyncio.ensure_future(work.run(short, round_))
        await asyncio.sleep(0.001 * (round_ % 3))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            assert await task == round_
    # Both workers still serve.
    assert await asyncio.gather(*(work.run(short, n) for n in range(4))) == [0, 1, 2, 3]
    pool.shutdown(wait=True)
