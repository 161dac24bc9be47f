"""Which trigger checks token bounds settle on τ-bench's sessions (a diagnostic, no target).

``python -m bench.token_bounds`` replays the airline sessions of τ-bench's test
split (``bench.economics.traces``, all four trials), one event per append,
under a few policies, as an engine that counts exactly only where it decides
would (``sidecar.compaction.token_bounds``): a pending event is only bounded;
a check the bounds do not settle counts the pending events exactly first; a
trigger that fires counts them too, and its strategy plans on exact counts.
It prints, per policy, the share of checks settled without counting and how
many sessions needed an exact count at all (each such session would build the
tokenizer in a server that had not yet), with the system prompt and tool list
kept out of the log (as the traces pin them) and appended as a system event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.economics.traces import Trace, tau_airline
from sidecar.compaction.policy import WindowStrategy
from sidecar.compaction.token_bounds import counters_between, settled_fires
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.compaction.triggers import AnyOf, TokenCount, Trigger, TurnCount
from sidecar.compaction.turn_window import TurnWindow
from sidecar.compaction.window import apply_plan
from sidecar.model import Event, Role, SessionCounters

POLICIES: dict[str, tuple[Trigger, WindowStrategy]] = {
    "token_count 8000 -> token_budget 4000 (the default)": (TokenCount(8000), TokenBudget(4000)),
    "token_count 2000 -> token_budget 1000": (TokenCount(2000), TokenBudget(1000)),
    "token_count 32000 -> token_budget 16000": (TokenCount(32000), TokenBudget(16000)),
    "any_of(turn_count 10, token_count 8000) -> turn_window 5": (
        AnyOf((TurnCount(10), TokenCount(8000))),
        TurnWindow(5),
    ),
}


@dataclass
class Tally:
    checks: int = 0
    settled: int = 0
    counted_to_decide: int = 0
    fired: int = 0
    sessions_counted: int = 0


def replay(
    events: Sequence[Event], trigger: Trigger, strategy: WindowStrategy, tally: Tally
) -> None:
    """One session, appended an event at a time; ``tally`` takes its checks."""
    window: list[Event] = []  # counted exactly
    pending: list[Event] = []
    counted = False
    for event in events:
        pending.append(event)
        tally.checks += 1
        low, high = counters_between(SessionCounters.of_window(window), pending)
        fires = settled_fires(trigger, low, high)
        if fires is None:
            tally.counted_to_decide += 1
        else:
            tally.settled += 1
        if fires is None or fires:
            counted = True
            window += [e.evolve(token_count=count_event(e)) for e in pending]
            pending = []
            fires = trigger.fires(SessionCounters.of_window(window))
        if fires:
            tally.fired += 1
            plan = strategy.plan(window)
            window = list(apply_plan(window, plan).active_events)
    tally.sessions_counted += counted


def session_events(trace: Trace, with_system: bool) -> list[Event]:
    if not with_system:
        return list(trace.events)
    return [Event(id="system", role=Role.SYSTEM, text=trace.system + trace.tools), *trace.events]


def main() -> None:
    traces = tau_airline("test")
    for with_system in (False, True):
        where = "appended as a system event" if with_system else "kept out of the log"
        print(f"{len(traces)} sessions, the system prompt and tool list {where}:")
        for name, (trigger, strategy) in POLICIES.items():
            tally = Tally()
            for trace in traces:
                replay(session_events(trace, with_system), trigger, strategy, tally)
            print(
                f"  {name}: {tally.settled} of {tally.checks} checks settled by the bounds"
                f" ({tally.settled / tally.checks:.1%}), {tally.counted_to_decide} counted"
                f" exactly to decide, {tally.fired} fired; {tally.sessions_counted} sessions"
                " counted exactly at least once"
            )


if __name__ == "__main__":
    main()
