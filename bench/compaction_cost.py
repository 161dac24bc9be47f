"""Target 3: a compaction pass costs the same on a 1,000- and a 100,000-event log.

Two sessions in one SQLite store, built directly (``SqliteStore.append`` with
token counts set, then a forced sliding-window pass after each batch archives
it). Then each timed pass: append ~100 events so the active window holds ~200,
and time ``SessionEngine.compact(force=True)`` with SlidingWindow(max_events=100).
Passes alternate between the sessions; the figure is the median time.
"""

from __future__ import annotations

from pathlib import Path

from bench.common import Log, Outcome, Scale, Stopwatch, Target, median, model_event
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.engine.engine import SessionEngine
from sidecar.store.sqlite import SqliteStore

TARGET_RATIO = 1.5
BATCH = 1000
KEEP = 100


def _policy(max_events: int) -> CompactionPolicy:
    return CompactionPolicy(trigger=None, strategy=SlidingWindow(max_events=max_events))


async def _build(engine: SessionEngine, session: str, archived: int) -> None:
    """Append ``archived`` short events and archive them, one batch at a time."""
    done = 0
    while done < archived:
        size = min(BATCH, archived - done)
        batch = [model_event(i, low=200, high=400) for i in range(done, done + size)]
        await engine.store.append(session, batch, create_if_missing=True)
        await engine.compact(session, policy=_policy(KEEP), force=True)
        done += size


async def _pass(engine: SessionEngine, session: str, offset: int) -> float:
    batch = [model_event(offset + i) for i in range(KEEP)]
    await engine.store.append(session, batch)
    _, window = await engine.store.active_window(session)
    with Stopwatch() as sw:
        result = await engine.compact(session, policy=_policy(KEEP), force=True)
    if not result.compacted:
        raise RuntimeError(f"pass on {session} with {len(window)} active did not compact")
    return sw.seconds


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    small_n, large_n, passes = scale.small_log, scale.large_log, scale.compaction_passes
    store = SqliteStore(str(workdir / "compaction.db"))
    await store.open()
    try:
        engine = SessionEngine(store)
        with Stopwatch() as build:
            await _build(engine, "small", small_n)
            await _build(engine, "large", large_n)
        small_total = (await store.get_session("small")).total_events
        large_total = (await store.get_session("large")).total_events
        log(
            f"compaction pass: logs of ~{small_n} and ~{large_n} archived events "
            f"(built in {build.seconds:.1f} s), window ~{2 * KEEP} -> {KEEP}, {passes} passes each"
        )
        for i in range(2):  # warm up
            await _pass(engine, "small", 10_000_000 + i * KEEP)
            await _pass(engine, "large", 20_000_000 + i * KEEP)
        small: list[float] = []
        large: list[float] = []
        for i in range(passes):
            small.append(await _pass(engine, "small", 30_000_000 + i * KEEP))
            large.append(await _pass(engine, "large", 40_000_000 + i * KEEP))
    finally:
        await store.close()
    small_ms, large_ms = median(small) * 1000, median(large) * 1000
    log(f"  median pass: {small_ms:.2f} ms on the small log, {large_ms:.2f} ms on the large log")
    return Outcome(
        figures={
            "small_archived": small_n,
            "large_archived": large_n,
            "small_total_events": small_total,
            "large_total_events": large_total,
            "passes": passes,
            "small_pass_ms": [s * 1000 for s in small],
            "large_pass_ms": [s * 1000 for s in large],
            "small_median_ms": small_ms,
            "large_median_ms": large_ms,
            "build_s": build.seconds,
        },
        targets=[
            Target(
                "compaction_pass_large_vs_small_log",
                large_ms / small_ms,
                TARGET_RATIO,
                False,
                f"pass time on {large_n} archived events / on {small_n}",
            ),
        ],
    )
