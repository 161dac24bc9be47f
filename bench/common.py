"""Shared pieces: run scales, targets, timing helpers, event builders."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


TINY = Scale("tiny", 150, 1, 400, 200, 30, 1_000, 2_000, 3)
QUICK = Scale("quick", 2_000, 3, 2_000, 200, 300, 1_000, 10_000, 9)
FULL = Scale("full", 20_000, 5, 10_000, 200, 2_000, 1_000, 100_000, 21)


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


Log = Callable[[str], None]

# Text sizes cycle through 300..2000 bytes, the range the targets are stated for.
_FILLER = "The quick brown fox jumps over the lazy dog while the agent inspects pods. "


def text_of(i: int, low: int = 300, high: int = 2000) -> str:
    size = low + (i * 337) % (high - low + 1)
    return (_FILLER * (size // len(_FILLER) + 1))[:size]


def role_of(i: int) -> Role:
    return Role.USER if i % 2 == 0 else Role.ASSISTANT


def pb_event(i: int) -> event_pb2.Event:
    role = event_pb2.ROLE_USER if i % 2 == 0 else event_pb2.ROLE_ASSISTANT
    return event_pb2.Event(role=role, text=text_of(i))


def model_event(i: int, *, low: int = 300, high: int = 2000) -> Event:
    """An event ready for ``Store.append``: id and token count already set."""
    text = text_of(i, low, high)
    return Event(id=new_event_id(), role=role_of(i), text=text, token_count=len(text) // 4)


def median(values: list[float]) -> float:
    return statistics.median(values)


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
