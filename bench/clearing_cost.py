"""Target: a clearing pass over a 1,000-event window costs at most 2 x a token_budget pass.

Both passes run through ``SessionEngine.compact(force=True)`` on a SQLite
store, each on a fresh copy of the same tool-heavy window: 1,000 events in
ten turns, each turn a user message then tool calls and their results (a
result of 1-3 KB, as logs and file reads are). ``clear_tool_results``
(keep_tool_uses 3) plans, counts every placeholder exactly and writes one
cleared copy per old result; ``token_budget`` (4,000 tokens) walks the same
window and archives its older turns. Passes alternate between the two; the
figure is the ratio of the median times. The strategies' pure planning
(no store) is timed too and reported beside it, not as the target: clearing
recounts each cleared event with tiktoken, which costs more than a walk, but
both passes are dominated by the store's write.
"""

from __future__ import annotations

import random
from pathlib import Path

from bench.common import Log, Outcome, Scale, Stopwatch, Target, median
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.engine.engine import SessionEngine
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.store.sqlite import SqliteStore

TARGET_RATIO = 2.0
WINDOW = 1_000
TURNS = 10
CLEARING = CompactionPolicy(None, ClearToolResults())
BUDGET = CompactionPolicy(None, TokenBudget(max_tokens=4000))
_WORDS = ("pod", "node", "error", "timeout", "retry", "deploy", "rollback", "latency", "disk")


def tool_window(seed: int = 7) -> list[Event]:
    """A 1,000-event window of tool loops, token counts set as the engine would."""
    rng = random.Random(seed)
    events: list[Event] = []
    per_turn = WINDOW // TURNS
    for turn in range(TURNS):
        events.append(Event(id=f"u{turn}", role=Role.USER, text=f"investigate incident {turn}"))
        pair = 0
        while len(events) < (turn + 1) * per_turn - 1:
            call = f"c{turn}-{pair}"
            size = rng.randint(150, 450)
            output = " ".join(rng.choice(_WORDS) for _ in range(size))
            events.append(
                Event(id=f"a{call}", role=Role.ASSISTANT, tool_calls=(ToolCall(call, "logs"),))
            )
            events.append(
                Event(
                    id=f"t{call}", role=Role.TOOL, tool_results=(ToolResult(call, "logs", output),)
                )
            )
            pair += 1
        events.append(Event(id=f"r{turn}", role=Role.ASSISTANT, text="found it"))
    return [e.evolve(token_count=count_event(e)) for e in events[:WINDOW]]


async def _pass(
    engine: SessionEngine, session: str, window: list[Event], policy: CompactionPolicy
) -> float:
    await engine.store.append(session, window, create_if_missing=True)
    with Stopwatch() as sw:
        result = await engine.compact(session, policy=policy, force=True)
    if not result.compacted:
        raise RuntimeError(f"{policy.strategy.name} pass on {session} did not compact")
    return sw.seconds


def _plan_ms(policy: CompactionPolicy, window: list[Event], passes: int) -> float:
    """The median time of the strategy's plan alone, in milliseconds."""
    strategy = policy.strategy
    assert isinstance(strategy, ClearToolResults | TokenBudget)
    times = []
    for _ in range(passes):
        with Stopwatch() as sw:
            strategy.plan(window)
        times.append(sw.seconds)
    return median(times) * 1000


async def run(scale: Scale, workdir: Path, log: Log) -> Outcome:
    passes = scale.compaction_passes
    window = tool_window()
    store = SqliteStore(str(workdir / "clearing.db"))
    await store.open()
    clearing: list[float] = []
    budget: list[float] = []
    try:
        engine = SessionEngine(store)
        log(f"clearing pass vs token_budget pass: {len(window)}-event tool window, {passes} each")
        for i in range(2 + passes):  # the first two of each warm up
            c = await _pass(engine, f"clear-{i}", window, CLEARING)
            b = await _pass(engine, f"budget-{i}", window, BUDGET)
            if i >= 2:
                clearing.append(c)
                budget.append(b)
        _, cleared_window = await store.active_window(f"clear-{passes + 1}")
        cleared = sum(e.cleared for e in cleared_window)
    finally:
        await store.close()
    clear_ms, budget_ms = median(clearing) * 1000, median(budget) * 1000
    clear_plan_ms, budget_plan_ms = (
        _plan_ms(CLEARING, window, passes),
        _plan_ms(BUDGET, window, passes),
    )
    log(
        f"  median pass: clear_tool_results {clear_ms:.2f} ms ({cleared} events cleared),"
        f" token_budget {budget_ms:.2f} ms; planning alone {clear_plan_ms:.2f} ms"
        f" and {budget_plan_ms:.2f} ms"
    )
    return Outcome(
        figures={
            "window_events": len(window),
            "passes": passes,
            "events_cleared": cleared,
            "clear_pass_ms": [s * 1000 for s in clearing],
            "budget_pass_ms": [s * 1000 for s in budget],
            "clear_median_ms": clear_ms,
            "budget_median_ms": budget_ms,
            "clear_plan_median_ms": clear_plan_ms,
            "budget_plan_median_ms": budget_plan_ms,
        },
        targets=[
            Target(
                "clearing_pass_vs_token_budget_pass",
                clear_ms / budget_ms,
                TARGET_RATIO,
                False,
                f"clear_tool_results pass / token_budget pass over the same {WINDOW}-event window",
            ),
        ],
    )
