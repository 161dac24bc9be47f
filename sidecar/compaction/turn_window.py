"""Turn window: keep the last N complete turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.compaction.boundary import settle_cut, turn_starts
from sidecar.compaction.window import (
    Window,
    check_max_dropped_identifiers,
    check_min_saved_tokens,
    plan_for_cut,
)
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, CompactionPlan, Event

DEFAULT_MAX_TURNS = 10


@dataclass(frozen=True, slots=True)
class TurnWindow:
    """Keeps the last ``max_turns`` turns; the preamble (before the first USER) is always kept.

    The limit counts turns, not events, so ten short turns and ten tool-heavy
    turns both count as ten.
    """

    max_turns: int = DEFAULT_MAX_TURNS
    boundary: Boundary = Boundary.TURN
    min_saved_tokens: int | None = None
    max_dropped_identifiers: int | None = None
    name = "turn_window"

    def __post_init__(self) -> None:
        check_min_saved_tokens(self.min_saved_tokens)
        check_max_dropped_identifiers(self.max_dropped_identifiers)
        if isinstance(self.max_turns, bool) or self.max_turns < 1:
            raise InvalidConfig(
                "strategy.turn_window.max_turns",
                f"must be at least 1, got {self.max_turns!r}",
            )

    def plan(self, events: Sequence[Event]) -> CompactionPlan:
        window = Window.of(events)
        starts = turn_starts(window.real)
        preamble = starts[0] if starts else 0
        if len(starts) <= self.max_turns:
            return plan_for_cut(window, 0, strategy=self.name, proposed=0)
        proposed = starts[-self.max_turns]
        # The proposal is a turn start already; settling only matters when a
        # kept tool result answers a call from an older turn.
        cut = settle_cut(window.real, proposed, Boundary.TURN)
        return plan_for_cut(
            window,
            max(cut, preamble),
            strategy=self.name,
            proposed=proposed,
            keep_from=preamble,
            min_saved_tokens=self.min_saved_tokens,
        )
