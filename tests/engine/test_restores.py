"""Restores in the engine: causes recorded, a summary in flight superseded, watchers told."""

from __future__ import annotations

import asyncio

from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import TurnCount
from sidecar.engine.engine import SessionEngine
from sidecar.model import Cause, CompactionResult, Event, Role
from sidecar.store.sqlite import SqliteStore
from tests.engine.gates import GatedSummarizer

SUMMARY = CompactionPolicy(
    TurnCount(3), Summarize(4, 1, shadow_prompt="Summary", max_summary_tokens=1)
)
WINDOW = CompactionPolicy(TurnCount(3), SlidingWindow(max_events=4))


def turn(n: int) -> list[Event]:
    return [
        Event(id=f"u{n}", role=Role.USER, text=f"question {n}"),
        Event(id=f"a{n}", role=Role.ASSISTANT, text=f"answer {n}"),
    ]


async def window_ids(engine: SessionEngine) -> list[str]:
    _, events = await engine.context("s")
    return [e.id for e in events]


async def test_every_pass_records_what_set_it_off(store: SqliteStore) -> None:
    summarizer = GatedSummarizer("so far")
    summarizer.gate.set()
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("s", policy=WINDOW)
    for n in range(4):
        await engine.append("s", turn(n))  # the trigger fires inline on the 4th turn
    await engine.compact("s", force=True, policy=CompactionPolicy(None, SlidingWindow(2)))
    await engine.update_session("s", policy=SUMMARY, set_policy=True)
    for n in range(4, 8):
        await engine.append("s", turn(n))  # a summary in the background
    await engine.wait_idle()
    page = await engine.restores.history("s", page_size=10, page_token="", max_bytes=None)
    assert [(r.strategy, r.cause) for r in page.items] == [
        ("summarize", Cause.BACKGROUND),
        ("sliding_window", Cause.FORCE),
        ("sliding_window", Cause.TRIGGER),
    ]


async def test_a_summary_in_flight_during_a_restore_is_superseded(store: SqliteStore) -> None:
    summarizer = GatedSummarizer("the story so far")
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("s", policy=WINDOW)
    for n in range(4):
        await engine.append("s", turn(n))
    assert await window_ids(engine) == ["u2", "a2", "u3", "a3"]
    await engine.update_session("s", policy=SUMMARY, set_policy=True)
    await engine.append("s", turn(4))
    scheduled = await engine.append("s", turn(5))
    assert scheduled.compaction_scheduled
    await summarizer.started.wait()  # planned on the window compaction's result
    watcher = engine.watch("s")
    restored = await engine.restores.restore("s")
    assert restored.strategy == "restore"
    seen = await asyncio.wait_for(watcher.next(), 5)
    assert isinstance(seen, CompactionResult)
    assert seen.compaction_id == restored.compaction_id
    summarizer.gate.set()
    await engine.wait_idle()
    # The restore stands: the late summary was refused, and nothing of it landed.
    assert await window_ids(engine) == [f"{r}{n}" for n in range(6) for r in "ua"]
    page = await engine.restores.history("s", page_size=10, page_token="", max_bytes=None)
    assert [r.strategy for r in page.items] == ["restore", "sliding_window"]
    watcher.close()
