"""Sliding window: keep the last N conversation events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.compaction.boundary import settle_cut
from sidecar.compaction.window import (
    Window,
    check_max_dropped_identifiers,
    check_min_saved_tokens,
    plan_for_cut,
)
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, CompactionPlan, Event

DEFAULT_MAX_EVENTS = 20


@dataclass(frozen=True, slots=True)
class SlidingWindow:
    """Keeps the last ``max_events`` conversation events, then lets the boundary rule move the cut.

    System messages and summaries are not counted. Under TURN the window can
    end up larger than ``max_events`` (the newest turn is always kept) or
    smaller (the cut snaps forward to the next turn start).
    """

    max_events: int = DEFAULT_MAX_EVENTS
    boundary: Boundary = Boundary.TURN
    min_saved_tokens: int | None = None
    max_dropped_identifiers: int | None = None
    name = "sliding_window"

    def __post_init__(self) -> None:
        check_min_saved_tokens(self.min_saved_tokens)
        check_max_dropped_identifiers(self.max_dropped_identifiers)
        if isinstance(self.max_events, bool) or self.max_events < 1:
            raise InvalidConfig(
                "strategy.sliding_window.max_events",
                f"must be at least 1, got {self.max_events!r}",
            )

    def plan(self, events: Sequence[Event]) -> CompactionPlan:
        window = Window.of(events)
        proposed = len(window.real) - self.max_events
        cut = settle_cut(window.real, proposed, self.boundary)
        return plan_for_cut(
            window,
            cut,
            strategy=self.name,
            proposed=proposed,
            min_saved_tokens=self.min_saved_tokens,
        )
