"""Triggers: when a session must be compacted.

Each reads the session's running counters, so a check costs O(1) whatever the
session's size. Counts compare with ``>`` (more than n), the token threshold
with ``>=`` (at or above), as in the reference semantics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from sidecar.errors import InvalidConfig
from sidecar.model import SessionCounters


class Trigger(Protocol):
    """Decides from the counters whether a compaction pass should run."""

    def fires(self, counters: SessionCounters) -> bool: ...


def _positive(field: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfig(field, f"must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class TurnCount:
    """Fires when the active window holds more than ``max_turns`` turns.

    The turn in progress counts.
    """

    max_turns: int

    def __post_init__(self) -> None:
        _positive("trigger.turn_count", self.max_turns)

    def fires(self, counters: SessionCounters) -> bool:
        return counters.turns > self.max_turns


@dataclass(frozen=True, slots=True)
class TokenCount:
    """Fires when the latest system message, summaries and conversation reach ``threshold``."""

    threshold: int

    def __post_init__(self) -> None:
        _positive("trigger.token_count", self.threshold)

    def fires(self, counters: SessionCounters) -> bool:
        return counters.tokens >= self.threshold


@dataclass(frozen=True, slots=True)
class ContextFraction:
    """Fires when the window's tokens reach ``fraction`` of the model's usable window.

    The usable window is the model's input window less its output reserve;
    ``window_tokens`` holds it once the policy is resolved against a session
    (``calibration.resolved``), calibration included. Unresolved (0) it never
    fires: the engine refuses such a policy on a session without a model.
    """

    fraction: float
    window_tokens: int = 0

    def __post_init__(self) -> None:
        value = self.fraction
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= 1
        ):
            raise InvalidConfig(
                "trigger.context_fraction", f"must be more than 0 and at most 1, got {value!r}"
            )

    @property
    def threshold(self) -> int:
        """The tokens at which it fires: at least 1."""
        return max(1, math.ceil(self.fraction * self.window_tokens))

    def fires(self, counters: SessionCounters) -> bool:
        return self.window_tokens > 0 and counters.tokens >= self.threshold


@dataclass(frozen=True, slots=True)
class EventCount:
    """Fires when the active window holds more than ``max_events`` conversation events."""

    max_events: int

    def __post_init__(self) -> None:
        _positive("trigger.event_count", self.max_events)

    def fires(self, counters: SessionCounters) -> bool:
        return counters.real_events > self.max_events


@dataclass(frozen=True, slots=True)
class Interval:
    """Fires every ``turns`` completed turns since the last compaction (ADK's compaction_interval).

    With ``turns=3`` a session compacts as turns 4, 7, 10, ... begin: each time
    three more turns have completed.
    """

    turns: int

    def __post_init__(self) -> None:
        _positive("trigger.interval_turns", self.turns)

    def fires(self, counters: SessionCounters) -> bool:
        return counters.turns_since_compaction > self.turns


@dataclass(frozen=True, slots=True)
class AnyOf:
    """Fires when any of its triggers fires."""

    triggers: tuple[Trigger, ...]

    def __post_init__(self) -> None:
        if not self.triggers:
            raise InvalidConfig("trigger.any_of", "needs at least one trigger")

    def fires(self, counters: SessionCounters) -> bool:
        return any(t.fires(counters) for t in self.triggers)


@dataclass(frozen=True, slots=True)
class AllOf:
    """Fires when all of its triggers fire."""

    triggers: tuple[Trigger, ...]

    def __post_init__(self) -> None:
        if not self.triggers:
            raise InvalidConfig("trigger.all_of", "needs at least one trigger")

    def fires(self, counters: SessionCounters) -> bool:
        return all(t.fires(counters) for t in self.triggers)


@dataclass(frozen=True, slots=True)
class Always:
    """Fires on every check."""

    def fires(self, counters: SessionCounters) -> bool:
        return True
