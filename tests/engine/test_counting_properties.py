"""Counting where it decides decides as counting everything would (issue 37).

The property: an engine that estimates appends and counts exactly only where
a decision needs it (``TokenCounting.WHEN_NEEDED``, and ``BACKGROUND``)
makes every decision an engine that counts every append exactly
(``ON_APPEND``) makes, over random sessions and policies: each trigger check
on append and on Compact (token_count, context_fraction under a calibration
that usage reports move, turn and event counts, intervals, any_of / all_of
of them), each plan (token_budget's cut, sliding and turn windows with
min_saved_tokens, clearing with min_cleared_tokens, a pipeline of clearing
then a budget, a summary's cost check), each usage report's calibration, and
the window and counters they leave, restores included. The two engines run
side by side on stores of their own; their answers are compared step by
step, and at the end their windows, once the deferred one has counted.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy, Strategy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import STAND_IN_KEY
from sidecar.compaction.triggers import (
    AllOf,
    AnyOf,
    ContextFraction,
    EventCount,
    Interval,
    TokenCount,
    Trigger,
    TurnCount,
)
from sidecar.compaction.turn_window import TurnWindow
from sidecar.engine.engine import AppendResult, SessionEngine, TokenCounting
from sidecar.errors import SidecarError
from sidecar.model import (
    CompactionResult,
    Event,
    ModelUsage,
    Reasoning,
    Role,
    Session,
    ToolCall,
    ToolResult,
)
from sidecar.store.sqlite import SqliteStore
from tests.compaction.fakes import FakeSummarizer

SERVER_ID = re.compile(r"[0-9a-f]{32}")

WORDS = st.sampled_from(
    ["the", "reservation", "ZFA04Y", "flight", "HAT136", "東京", "🙂", '{"a": 1}', "\n", "    "]
)
TEXTS = st.one_of(
    st.lists(WORDS, max_size=400).map(" ".join),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=300),
    st.integers(0, 3000).map(lambda n: " " * n),  # runs of spaces: cl100k's longest tokens
)


@st.composite
def turns(draw: st.DrawFn, n: int) -> list[Event]:
    """One turn: a user message, then assistant steps with tool calls answered."""
    events = [Event(id=f"u{n}", role=Role.USER, text=draw(TEXTS))]
    for k in range(draw(st.integers(0, 3))):
        call = f"c{n}-{k}"
        reasoning: tuple[Reasoning, ...] = ()
        if draw(st.booleans()):
            reasoning = (
                Reasoning(
                    text=draw(TEXTS),
                    signature=b"\x01" * draw(st.integers(0, 400)),
                    redacted=draw(st.booleans()),
                ),
            )
        events.append(
            Event(
                id=f"a{call}",
                role=Role.ASSISTANT,
                text=draw(TEXTS),
                tool_calls=(ToolCall(call, "search", '{"q": "x"}'),),
                reasoning=reasoning,
            )
        )
        # now and then a stand-in: a result too large to store, sent whole by its framework
        held = draw(st.one_of(st.none(), st.integers(0, 40_000)))
        events.append(
            Event(
                id=f"t{call}",
                role=Role.TOOL,
                tool_results=(ToolResult(call, "search", draw(TEXTS)),),
                metadata={} if held is None else {STAND_IN_KEY: str(held)},
            )
        )
    events.append(Event(id=f"a{n}", role=Role.ASSISTANT, text=draw(TEXTS)))
    if draw(st.integers(0, 9)) == 0:
        events.insert(0, Event(id=f"s{n}", role=Role.SYSTEM, text=draw(TEXTS)))
    return events


def triggers() -> st.SearchStrategy[Trigger]:
    leaves: st.SearchStrategy[Trigger] = st.one_of(
        st.builds(TokenCount, st.integers(1, 4000)),
        st.builds(ContextFraction, st.floats(0.0005, 0.05)),  # 56 to 5,600 of gpt-4o's window
        st.builds(TurnCount, st.integers(1, 6)),
        st.builds(EventCount, st.integers(1, 16)),
        st.builds(Interval, st.integers(1, 4)),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(AnyOf, st.lists(inner, min_size=1, max_size=3).map(tuple)),
            st.builds(AllOf, st.lists(inner, min_size=1, max_size=3).map(tuple)),
        ),
        max_leaves=4,
    )


SAVED = st.one_of(st.none(), st.integers(1, 2000))


def strategies() -> st.SearchStrategy[Strategy]:
    budget = st.builds(TokenBudget, st.integers(1, 3000), min_saved_tokens=SAVED)
    clearing = st.builds(
        ClearToolResults,
        keep_tool_uses=st.integers(0, 3),
        min_cleared_tokens=st.integers(0, 2000),
        keep_identifiers=st.booleans(),
    )
    return st.one_of(
        budget,
        st.builds(SlidingWindow, st.integers(1, 12), min_saved_tokens=SAVED),
        st.builds(TurnWindow, st.integers(1, 4), min_saved_tokens=SAVED),
        clearing,
        st.builds(Pipeline, st.tuples(clearing, budget)),
        st.integers(1, 8).flatmap(
            lambda keep: st.builds(
                Summarize,
                st.just(keep),
                st.integers(0, min(2, keep - 1)),
                max_summary_tokens=st.integers(1, 200),
            )
        ),
    )


@dataclass(frozen=True)
class Append:
    events: list[Event]
    usage: int | None  # prompt tokens reported for the last version handed out


@dataclass(frozen=True)
class Compact:
    pass


@dataclass(frozen=True)
class Restore:
    pass


@st.composite
def scripts(draw: st.DrawFn) -> list[Append | Compact | Restore]:
    out: list[Append | Compact | Restore] = []
    for n in range(draw(st.integers(1, 10))):
        usage = draw(st.one_of(st.none(), st.integers(1, 20_000)))
        out.append(Append(draw(turns(n)), usage))
        extra = draw(st.sampled_from([None, None, None, Compact(), Restore()]))
        if extra is not None:
            out.append(extra)
    return out


def named(ids: Sequence[str]) -> list[str]:
    """Ids with the summaries' (server-assigned, random) replaced by one name."""
    return ["summary" if SERVER_ID.fullmatch(i) else i for i in ids]


def decided(result: CompactionResult | None) -> object:
    """What a pass decided, as both engines must decide it."""
    if result is None:
        return None
    return (
        result.compacted,
        result.strategy,
        named([e.id for e in result.archived_events]),
        result.cleared_ids,
        named(result.restored_ids),
        result.tokens_estimated_saved,
        result.skipped_reason,
        result.version,
        result.identifiers_dropped,
    )


def appended(result: AppendResult) -> object:
    s = result.session
    return (
        [e.id for e in result.events],
        s.version,
        s.calibration,
        s.counters.turns,
        s.counters.real_events,
        result.written,
        result.compaction_scheduled,
        result.usage_ignored_reason,
        decided(result.compaction),
    )


class Side:
    """One engine on a store of its own, replaying a script."""

    def __init__(self, path: Path, counting: TokenCounting) -> None:
        self.store = SqliteStore(str(path))
        self.engine = SessionEngine(
            self.store, summarizer=FakeSummarizer("the gist"), token_counting=counting
        )
        self.version = 0

    async def step(self, step: Append | Compact | Restore) -> object:
        engine = self.engine
        try:
            if isinstance(step, Append):
                usage = None
                if step.usage is not None and self.version:
                    usage = ModelUsage(self.version, step.usage)
                result = await engine.append("s", step.events, usage=usage)
                await engine.wait_idle()  # a summary scheduled runs to its end
                self.version = result.session.version
                return appended(result)
            if isinstance(step, Compact):
                return decided(await engine.compact("s"))
            return decided(await engine.restores.restore("s"))
        except SidecarError as exc:
            return type(exc).__name__

    async def history(self) -> object:
        page = await self.store.list_compactions("s", page_size=1000, page_token="")
        return [
            (r.strategy, named(r.archived_ids), r.cleared_ids, r.tokens_saved, r.cause)
            for r in page.items
        ]

    async def exact_window(self) -> tuple[Session, tuple[Event, ...]]:
        await self.engine.counts.exact("s")
        return await self.store.active_window("s")


async def replay(
    policy: CompactionPolicy, script: Sequence[Append | Compact | Restore], deferred: TokenCounting
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        exact = Side(Path(tmp) / "exact.db", TokenCounting.ON_APPEND)
        other = Side(Path(tmp) / "deferred.db", deferred)
        sides = (exact, other)
        for side in sides:
            await side.store.open()
            await side.engine.create_session("s", policy=policy, model="gpt-4o")
        try:
            for index, step in enumerate(script):
                expected = await exact.step(step)
                assert await other.step(step) == expected, f"step {index}: {step}"
            assert await other.history() == await exact.history()
            (want_session, want), (got_session, got) = [await s.exact_window() for s in sides]
            assert [(named([e.id]), e.token_count, e.cleared) for e in got] == [
                (named([e.id]), e.token_count, e.cleared) for e in want
            ]
            assert got_session.counters == want_session.counters
            assert got_session.calibration == want_session.calibration
        finally:
            for side in sides:
                await side.engine.close()
                await side.store.close()


@pytest.mark.parametrize("deferred", [TokenCounting.WHEN_NEEDED, TokenCounting.BACKGROUND])
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(policy=st.builds(CompactionPolicy, triggers(), strategies()), script=scripts())
def test_counting_where_it_decides_decides_as_counting_everything(
    deferred: TokenCounting, policy: CompactionPolicy, script: list[Append | Compact | Restore]
) -> None:
    asyncio.run(replay(policy, script, deferred))
