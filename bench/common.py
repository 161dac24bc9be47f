"""Shared pieces: run scales, targets, timing helpers, event builders."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.texts import is_user, text_of
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.model import Event, Role, new_event_id


@dataclass(frozen=True, slots=True)
class Scale:
    """How big each benchmark runs."""

    name: str
    # streamed appends
    stream_messages: int
    stream_rounds: int
    # GetContext
    context_events: int
    context_window: int
    context_calls: int
    # compaction pass cost
    small_log: int
    large_log: int
    compaction_passes: int
    # against Google ADK: appends per round (each ADK variant), rounds, unary and streamed
    # sidecar appends per round
    adk_appends: int = 100
    adk_rounds: int = 1
    unary_appends: int = 100
    adk_streamed: int = 1_000
    # against ADK get_session: session size (sidecar and ADK alike), ADK get_session calls
    adk_context_events: int = 400
    adk_get_calls: int = 3
    # token accounting: appends per run, each event's tool result size in bytes
    token_appends: int = 10
    tool_result_bytes: int = 100_000
    # memory: session counts at which the server's RSS is read (the last is the total)
    memory_sessions: tuple[int, ...] = (100, 200)
    memory_idle_s: float = 1.0
    # latency under load: probe calls, concurrent streaming clients
    probe_calls: int = 100
    load_clients: int = 8
    # window cost: active window sizes (smallest is the baseline), seconds of quiet probing
    window_sizes: tuple[int, ...] = (1_000, 4_000)
    window_quiet_s: float = 1.0


TINY = Scale(
    "tiny", 150, 1, 400, 200, 30, 1_000, 2_000, 3,
    adk_appends=30, adk_rounds=1, unary_appends=50, adk_streamed=150,
    adk_context_events=300, adk_get_calls=2,
    token_appends=5,
    memory_sessions=(100, 200), memory_idle_s=0.2,
    probe_calls=30,
    window_sizes=(500, 2_000), window_quiet_s=0.5,
)  # fmt: skip
QUICK = Scale(
    "quick", 2_000, 3, 2_000, 200, 300, 1_000, 10_000, 9,
    adk_appends=100, adk_rounds=2, unary_appends=300, adk_streamed=2_000,
    adk_context_events=600, adk_get_calls=3,
    token_appends=25,
    memory_sessions=(500, 1_000, 2_000), memory_idle_s=1.0,
    probe_calls=100,
    window_sizes=(2_000, 10_000, 20_000), window_quiet_s=2.0,
)  # fmt: skip
FULL = Scale(
    "full", 20_000, 5, 10_000, 200, 2_000, 1_000, 100_000, 21,
    adk_appends=500, adk_rounds=3, unary_appends=1_000, adk_streamed=5_000,
    adk_context_events=10_000, adk_get_calls=5,
    token_appends=100,
    memory_sessions=(1_000, 2_500, 5_000, 10_000), memory_idle_s=40.0,
    probe_calls=1_000,
    window_sizes=(10_000, 100_000, 200_000), window_quiet_s=5.0,
)  # fmt: skip


@dataclass(slots=True)
class Target:
    """One performance target: a measured ratio against a bound."""

    name: str
    ratio: float
    bound: float
    at_least: bool  # True: ratio >= bound; False: ratio <= bound
    description: str = ""

    @property
    def passed(self) -> bool:
        return self.ratio >= self.bound if self.at_least else self.ratio <= self.bound

    def line(self) -> str:
        op = ">=" if self.at_least else "<="
        verdict = "PASS" if self.passed else "MISS"
        return (
            f"TARGET {self.name}: measured ratio {self.ratio:.2f} "
            f"(target {op} {self.bound:g}) {verdict}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "bound": self.bound,
            "op": ">=" if self.at_least else "<=",
            "pass": self.passed,
            "description": self.description,
        }


@dataclass(slots=True)
class Outcome:
    """What one benchmark measured: free-form figures and its targets."""

    figures: dict[str, Any] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    # Targets not measured, with why (only the ADK ones, only in tiny mode without ADK).
    skipped: dict[str, str] = field(default_factory=dict)


Log = Callable[[str], None]


def role_of(i: int) -> Role:
    return Role.USER if is_user(i) else Role.ASSISTANT


def pb_event(i: int) -> event_pb2.Event:
    role = event_pb2.ROLE_USER if is_user(i) else event_pb2.ROLE_ASSISTANT
    return event_pb2.Event(role=role, text=text_of(i))


def model_event(i: int, *, low: int = 300, high: int = 2000) -> Event:
    """An event ready for ``Store.append``: id and token count already set."""
    text = text_of(i, low, high)
    return Event(id=new_event_id(), role=role_of(i), text=text, token_count=len(text) // 4)


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by nearest rank: a value that was measured."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.perf_counter() - self._start
