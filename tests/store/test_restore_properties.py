"""Property: compact, append, restore gives back the window and counters exactly, plus the appends.

Random well-formed sessions (turns with tool loops and a system message),
compacted by one to three passes of random real strategies (windows, token
budget, clearing, summarize with a scripted summarizer), with random appends
between passes; restoring every pass, newest first, must walk the session
back through each state it had, with the appends made since kept at the end.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import plan_step
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.compaction.turn_window import TurnWindow
from sidecar.model import (
    Boundary,
    CompactionPlan,
    Event,
    Role,
    SessionCounters,
    ToolCall,
    ToolResult,
)
from sidecar.store.sqlite import SqliteStore
from sidecar.summarizer.protocol import SummaryResponse

_ids = itertools.count()


def _counted(event: Event) -> Event:
    return event.evolve(token_count=count_event(event))


@st.composite
def turns(draw: st.DrawFn, min_turns: int = 0) -> list[Event]:
    events: list[Event] = []
    for _ in range(draw(st.integers(min_turns, 5))):
        n = next(_ids)
        events.append(
            _counted(Event(id=f"u{n}", role=Role.USER, text="ask " * draw(st.integers(1, 30))))
        )
        for k in range(draw(st.integers(0, 3))):
            call = f"c{n}-{k}"
            events.append(
                _counted(
                    Event(id=f"a{n}-{k}", role=Role.ASSISTANT, tool_calls=(ToolCall(call, "grep"),))
                )
            )
            content = "row " * draw(st.integers(1, 200))
            events.append(
                _counted(
                    Event(
                        id=f"t{n}-{k}",
                        role=Role.TOOL,
                        tool_results=(ToolResult(call, "grep", content),),
                    )
                )
            )
        events.append(_counted(Event(id=f"a{n}", role=Role.ASSISTANT, text="done")))
    return events


STRATEGIES = st.one_of(
    st.builds(SlidingWindow, max_events=st.integers(1, 8), boundary=st.sampled_from(Boundary)),
    st.builds(TurnWindow, max_turns=st.integers(1, 3), boundary=st.sampled_from(Boundary)),
    st.builds(TokenBudget, max_tokens=st.integers(20, 400), boundary=st.sampled_from(Boundary)),
    st.builds(ClearToolResults, keep_tool_uses=st.integers(0, 3)),
    st.builds(
        Summarize,
        max_events_to_keep=st.integers(1, 6),
        overlap=st.just(0),
        min_saved_tokens=st.just(1),
    ),
)


async def _plan(store: SqliteStore, strategy: object) -> CompactionPlan:
    session, window = await store.active_window("s")
    if isinstance(strategy, Summarize):
        job = strategy.prepare(window)
        if isinstance(job, CompactionPlan):
            plan = job
        else:
            plan = strategy.finish(
                job, SummaryResponse(text="so far", input_tokens=1, output_tokens=2)
            )
    else:
        plan = plan_step(strategy, window)  # type: ignore[arg-type]
    return replace(plan, base_compaction_id=session.last_compaction_id)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    system=st.booleans(),
    first=turns(min_turns=1),
    passes=st.lists(st.tuples(STRATEGIES, turns()), min_size=1, max_size=3),
)
def test_restores_walk_back_through_every_state_keeping_the_appends(
    system: bool, first: list[Event], passes: list[tuple[object, list[Event]]]
) -> None:
    async def body(directory: Path) -> None:
        store = SqliteStore(str(directory / "p.db"))
        await store.open()
        try:
            start = [_counted(Event(id="sys", role=Role.SYSTEM, text="be brief"))] if system else []
            await store.append("s", start + first, create_if_missing=True)
            # Each landed pass, with the state right before it and the appends after it.
            landed: list[tuple[str, SessionCounters, tuple[Event, ...], list[Event]]] = []
            for strategy, appended in passes:
                session, window = await store.active_window("s")
                plan = await _plan(store, strategy)
                if not plan.is_empty:
                    applied = await store.apply("s", plan)
                    landed.append((applied.compaction_id, session.counters, window, []))
                    # The counters moved by the plan's own rows are the window's.
                    after, compacted = await store.active_window("s")
                    assert applied.session.counters == after.counters
                    assert replace(after.counters, turns_since_compaction=0) == replace(
                        SessionCounters.of_window(compacted), turns_since_compaction=0
                    )
                if appended:
                    await store.append("s", appended)
                    if landed:
                        landed[-1][3].extend(appended)
            later: list[Event] = []  # appended after the pass being undone, oldest first
            for compaction_id, counters, window, appended in reversed(landed):
                later = appended + later
                outcome = await store.restore("s", compaction_id)
                session, now = await store.active_window("s")
                assert outcome.session == session
                expected_ids = [e.id for e in window] + [e.id for e in later]
                assert [e.id for e in now] == expected_ids
                assert now[: len(window)] == window
                assert not any(e.cleared for e in now[len(window) :])
                added = SessionCounters.of_window(now[len(window) :])
                expected = SessionCounters.of_window(
                    now,
                    counters.turns_since_compaction + added.turns,
                )
                assert session.counters == expected
        finally:
            await store.close()

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(body(Path(directory)))
