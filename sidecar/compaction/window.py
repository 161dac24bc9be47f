"""The active window as strategies see it, and how a plan changes it.

Every strategy works on the same partition of the active window: the latest
stored system message (pinned where it was stored, not counted against any
limit), superseded system messages (archived on every pass), summaries
(synthetic events, kept), and the real conversation, which alone is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sidecar.errors import InvalidConfig
from sidecar.model import (
    CompactionPlan,
    CompactionResult,
    Event,
    Role,
    SkipReason,
)


@dataclass(frozen=True, slots=True)
class Window:
    """A partition of the active window, each part in log order."""

    events: tuple[Event, ...]
    real: tuple[Event, ...]
    latest_system: Event | None
    superseded_systems: tuple[Event, ...]
    summaries: tuple[Event, ...]

    @classmethod
    def of(cls, events: Sequence[Event]) -> Window:
        systems = [e for e in events if e.role is Role.SYSTEM and not e.synthetic]
        return cls(
            events=tuple(events),
            real=tuple(e for e in events if e.is_real),
            latest_system=systems[-1] if systems else None,
            superseded_systems=tuple(systems[:-1]),
            summaries=tuple(e for e in events if e.synthetic),
        )

    @property
    def pinned_tokens(self) -> int:
        """Tokens sent with the conversation whatever the cut: system message and summaries."""
        system = self.latest_system.token_count if self.latest_system else 0
        return system + sum(e.token_count for e in self.summaries)


def plan_for_cut(
    window: Window,
    cut: int,
    *,
    strategy: str,
    proposed: int,
    keep_from: int = 0,
    inserts: tuple[Event, ...] = (),
    also_archive: tuple[Event, ...] = (),
    skipped: SkipReason | None = None,
    min_saved_tokens: int | None = None,
) -> CompactionPlan:
    """The plan that archives ``window.real[keep_from:cut]`` and the superseded systems.

    ``keep_from`` spares a leading preamble; ``inserts`` go right before the
    first kept conversation event; ``also_archive`` adds events (a previous
    summary) to the archive. ``proposed`` is the strategy's cut before the
    boundary rules moved it, used to say why nothing was archived. A cut that
    frees fewer than ``min_saved_tokens`` is not made (``not_worth_it``):
    every pass breaks the provider's prompt cache from its first change on.
    """
    conversation = window.real[keep_from:cut] if cut > keep_from else ()
    archived = window.superseded_systems + conversation + also_archive
    if skipped is None and not conversation:
        skipped = SkipReason.WITHIN_LIMIT if proposed <= keep_from else SkipReason.NO_TURN_BOUNDARY
    saved = sum(e.token_count for e in archived) - sum(e.token_count for e in inserts)
    if conversation and min_saved_tokens is not None and saved < min_saved_tokens:
        return plan_for_cut(
            window, 0, strategy=strategy, proposed=proposed, skipped=SkipReason.NOT_WORTH_IT
        )
    insert_before = window.real[cut].id if inserts and cut < len(window.real) else None
    return CompactionPlan(
        strategy=strategy,
        archive_ids=tuple(e.id for e in _in_log_order(window.events, archived)),
        inserts=inserts if insert_before else (),
        insert_before=insert_before,
        tokens_estimated_saved=saved if archived else 0,
        skipped_reason=skipped,
    )


def check_min_saved_tokens(value: int | None) -> None:
    """``min_saved_tokens``, when set, is a non-negative token count."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidConfig("strategy.min_saved_tokens", f"must be 0 or more, got {value!r}")


def check_max_dropped_identifiers(value: int | None) -> None:
    """``max_dropped_identifiers``, when set, is a non-negative count."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidConfig("strategy.max_dropped_identifiers", f"must be 0 or more, got {value!r}")


def _in_log_order(events: Sequence[Event], chosen: Sequence[Event]) -> list[Event]:
    ids = {e.id for e in chosen}
    return [e for e in events if e.id in ids]


def apply_plan(events: Sequence[Event], plan: CompactionPlan) -> CompactionResult:
    """The result of applying ``plan`` to the active window ``events``, in memory.

    The store does the same durably; this is the reference the tests and the
    demo use. Archived events keep their place in the log; inserts land right
    before ``plan.insert_before``; cleared events take the place of the events
    they clear.
    """
    archive = set(plan.archive_ids)
    cleared = {e.id: e for e in plan.clears}
    active: list[Event] = []
    archived: list[Event] = []
    for event in events:
        if event.id == plan.insert_before:
            active.extend(plan.inserts)
        if event.id in archive:
            archived.append(event.evolve(archived=True))
        else:
            active.append(cleared.get(event.id, event))
    return CompactionResult(
        compacted=not plan.is_empty,
        strategy=plan.strategy,
        active_events=tuple(active),
        archived_events=tuple(archived),
        tokens_estimated_saved=plan.tokens_estimated_saved,
        skipped_reason=plan.skipped_reason,
        cleared_ids=tuple(cleared),
    )
