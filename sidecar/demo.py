"""``compaction-sidecar demo``: a realistic transcript through each strategy, in process.

The transcript is appended event by event, as an agent would; whenever the
policy's trigger fires, the strategy compacts the active window. At the end
the demo prints every pass, the kept window, and the token counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import with_token_count
from sidecar.compaction.triggers import TokenCount, TurnCount
from sidecar.compaction.turn_window import TurnWindow
from sidecar.compaction.window import apply_plan
from sidecar.model import CompactionPlan, Event, SessionCounters
from sidecar.render import LEGEND, event_lines
from sidecar.summarizer.extractive import ExtractiveSummarizer
from sidecar.transcript import transcript

POLICIES: dict[str, CompactionPolicy] = {
    "sliding_window": CompactionPolicy(TurnCount(12), SlidingWindow(max_events=20)),
    "turn_window": CompactionPolicy(TurnCount(12), TurnWindow(max_turns=6)),
    "token_budget": CompactionPolicy(TokenCount(3000), TokenBudget(max_tokens=1500)),
    "summarize": CompactionPolicy(
        TokenCount(3000), Summarize(max_events_to_keep=12, overlap=2, max_summary_tokens=300)
    ),
}


@dataclass(frozen=True, slots=True)
class Run:
    """What one strategy did to the transcript."""

    name: str
    passes: list[str]
    active: list[Event]
    archived: list[Event]
    tokens_appended: int


async def run(name: str, policy: CompactionPolicy, events: Sequence[Event]) -> Run:
    summarizer = ExtractiveSummarizer()
    active: list[Event] = []
    archived: list[Event] = []
    counters = SessionCounters()
    passes: list[str] = []
    for position, event in enumerate(events, start=1):
        event = with_token_count(event).evolve(position=position)
        active.append(event)
        counters = counters.after_append(event)
        if policy.trigger is None or not policy.trigger.fires(counters):
            continue
        strategy = policy.strategy
        plan: CompactionPlan
        if isinstance(strategy, Summarize):
            plan = await strategy.plan(active, summarizer)
        else:
            plan = strategy.plan(active)
        result = apply_plan(active, plan)
        before = counters.tokens
        active = list(result.active_events)
        archived.extend(result.archived_events)
        counters = SessionCounters.after_compaction(active)
        if plan.is_empty:
            passes.append(f"  after event {position:>3}: skipped ({plan.skipped_reason})")
        else:
            passes.append(
                f"  after event {position:>3}: archived {result.archived_event_count:>3} events,"
                f" {before:>5} -> {counters.tokens:>5} tokens"
                f" (saved {plan.tokens_estimated_saved})"
            )
    return Run(name, passes, active, archived, sum(e.token_count for e in active + archived))


def render(run: Run, policy: CompactionPolicy) -> str:
    active_tokens = SessionCounters.of_window(run.active).tokens
    lines = [
        "=" * 100,
        f"strategy {run.name}: {policy.to_dict()}",
        "=" * 100,
        f"compaction passes ({len(run.passes)}):",
        *run.passes,
        "",
        f"kept window ({len(run.active)} events, {active_tokens} tokens):",
        *event_lines(run.active),
        "",
        f"archived: {len(run.archived)} events, still in the log and searchable",
        f"tokens: {run.tokens_appended} appended in total -> {active_tokens} in the next prompt",
        "",
    ]
    return "\n".join(lines)


async def demo(only: str | None = None) -> str:
    events = transcript()
    out = [
        f"Replaying a {len(events)}-event, 40-turn SRE agent session through each strategy.",
        LEGEND,
        "",
    ]
    for name, policy in POLICIES.items():
        if only and name != only:
            continue
        out.append(render(await run(name, policy, events), policy))
    return "\n".join(out)


def main(only: str | None = None) -> None:
    print(asyncio.run(demo(only)))
