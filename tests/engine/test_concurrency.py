"""Many writers at once: nothing lost, positions dense, versions strictly increasing."""

from __future__ import annotations

import asyncio
import random

from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import TurnCount
from sidecar.engine.engine import SessionEngine
from sidecar.engine.locks import LockRegistry
from sidecar.model import Event, Role
from sidecar.store.sqlite import SqliteStore
from sidecar.summarizer.protocol import SummaryRequest, SummaryResponse


class JitterySummarizer:
    """Answers after a random short delay, so LLM calls overlap with appends."""

    async def summarize(self, request: SummaryRequest) -> SummaryResponse:
        await asyncio.sleep(random.uniform(0, 0.02))
        return SummaryResponse(text="so far")


async def check_log(store: SqliteStore, session_id: str, appended: set[str]) -> None:
    log = (await store.list_events(session_id, page_size=1000, page_token="")).items
    real = [e.id for e in log if not e.synthetic]
    assert sorted(real) == sorted(appended)  # every acknowledged event exactly once
    assert sorted(e.position for e in log) == list(range(1, len(log) + 1))  # dense


async def writer(
    engine: SessionEngine, session_id: str, name: str, batches: int
) -> tuple[set[str], list[int]]:
    ids: set[str] = set()
    versions: list[int] = []
    for n in range(batches):
        batch = [
            Event(id=f"{name}-u{n}", role=Role.USER, text=f"{name} asks {n}"),
            Event(id=f"{name}-a{n}", role=Role.ASSISTANT, text=f"{name} answers {n}"),
        ]
        result = await engine.append(session_id, batch)
        ids.update(e.id for e in batch)
        # After an inline compaction this is the compaction's version.
        versions.append(result.session.version)
    return ids, versions


async def test_many_writers_one_session_with_inline_compaction(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("hot", policy=CompactionPolicy(TurnCount(6), SlidingWindow(8)))
    results = await asyncio.gather(*(writer(engine, "hot", f"w{i}", 25) for i in range(12)))
    appended = set().union(*(ids for ids, _ in results))
    await check_log(store, "hot", appended)
    versions = [v for _, vs in results for v in vs]
    assert len(versions) == len(set(versions))  # every write got its own version
    for _, own in results:
        assert own == sorted(own)  # and each writer saw them increase
    assert len(engine.locks) == 0


async def test_many_sessions_with_background_summaries(store: SqliteStore) -> None:
    engine = SessionEngine(store, summarizer=JitterySummarizer())
    policy = CompactionPolicy(
        TurnCount(4), Summarize(4, 1, shadow_prompt="Summary", max_summary_tokens=1)
    )
    sessions = [f"s{i}" for i in range(20)]
    for sid in sessions:
        await engine.create_session(sid, policy=policy)
    jobs = [writer(engine, sid, f"{sid}w{k}", 15) for sid in sessions for k in range(2)]
    results = await asyncio.gather(*jobs)
    await engine.wait_idle()
    for index, sid in enumerate(sessions):
        appended = results[2 * index][0] | results[2 * index + 1][0]
        await check_log(store, sid, appended)
        _, window = await store.active_window(sid)
        assert sum(e.synthetic for e in window) in (0, 2)
    compactions = 0
    for sid in sessions:
        compactions += len((await store.list_compactions(sid, page_size=100, page_token="")).items)
    assert compactions > 0
    assert len(engine.locks) == 0


async def test_lock_registry_returns_to_empty_after_a_burst_over_100k_sessions() -> None:
    registry = LockRegistry()
    release = asyncio.Event()
    all_held = asyncio.Event()
    total = 100_000
    held = 0

    async def hold(key: str) -> None:
        nonlocal held
        async with registry.hold(key):
            held += 1
            if held == total:
                all_held.set()
            await release.wait()

    tasks = [asyncio.create_task(hold(f"session-{i}")) for i in range(total)]
    await all_held.wait()
    assert len(registry) == total
    release.set()
    await asyncio.gather(*tasks)
    assert len(registry) == 0


async def test_lock_registry_serializes_one_key() -> None:
    registry = LockRegistry()
    inside = 0
    peak = 0

    async def critical() -> None:
        nonlocal inside, peak
        async with registry.hold("k"):
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0)
            inside -= 1

    await asyncio.gather(*(critical() for _ in range(50)))
    assert peak == 1
    assert len(registry) == 0


async def test_engine_leaves_no_entries_for_idle_sessions(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await asyncio.gather(
        *(
            engine.append(
                f"idle-{i}", [Event(id="e", role=Role.USER, text="hi")], create_if_missing=True
            )
            for i in range(2000)
        )
    )
    assert len(engine.locks) == 0
    assert len(engine.watchers) == 0
    assert engine.in_flight() == 0
