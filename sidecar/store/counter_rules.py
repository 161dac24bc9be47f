"""The window's counters as the stores keep them: summed in SQL, moved by the rows a write
changes, never by decoding the window.

Both stores read the same columns (``PENDING_SLACK``, ``MARKED_COLUMNS``) and
build the same ``SessionCounters`` from them here, so a restore, a compaction
and a landed exact count leave the counters ``SessionCounters.of_window``
would compute, on either store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sidecar.model import Event, Role, SessionCounters


def window_counters(
    events: int,
    real: int,
    turns: int,
    other_tokens: int,
    system_tokens: int,
    pending_below: int = 0,
    pending_above: int = 0,
) -> SessionCounters:
    """``SessionCounters.of_window`` of a window the store summed up in SQL, never decoded.

    ``other_tokens`` sums every event's count but the non-synthetic system
    messages'; ``system_tokens`` is the latest one's (0 without one);
    ``pending_below`` and ``pending_above`` sum how far the pending events'
    estimates can be off (``PENDING_SLACK``). Every turn is counted in
    ``turns_since_compaction``, as ``of_window`` does.
    """
    return SessionCounters(
        active_events=events,
        real_events=real,
        turns=turns,
        tokens=other_tokens + system_tokens,
        system_tokens=system_tokens,
        turns_since_compaction=turns,
        pending_below=pending_below,
        pending_above=pending_above,
    )


PENDING_SLACK = (
    "CASE WHEN e.cleared_content IS NULL AND e.token_low IS NOT NULL"
    " THEN e.token_count - e.token_low ELSE 0 END",
    "CASE WHEN e.cleared_content IS NULL AND e.token_low IS NOT NULL"
    " THEN e.token_high - e.token_count ELSE 0 END",
)
"""How far below and above its estimate a row's exact count can lie, as the window shows
it (0 for a counted or cleared one): SQL both stores sum."""

PENDING_SUMS = f"coalesce(sum({PENDING_SLACK[0]}), 0), coalesce(sum({PENDING_SLACK[1]}), 0)"
"""The window's pending slack below and above, summed: the last two arguments of
``window_counters``."""


MARKED_COLUMNS = (
    "e.role, e.synthetic, e.archived, coalesce(e.cleared_token_count, e.token_count),"
    f" {PENDING_SLACK[0]}, {PENDING_SLACK[1]}"
)
"""What ``counters_moved`` reads of each row a restore marks, in its order."""


Marked = tuple[str, bool, bool, int, int, int]
"""A row's ``MARKED_COLUMNS``: role, synthetic, archived, the token count the window shows,
and how far below and above it the exact count can lie."""


def counters_moved(
    before: SessionCounters, was: Sequence[Marked], now: Sequence[Marked]
) -> SessionCounters | None:
    """The window's counters once a few rows changed from ``was`` to ``now``
    (``MARKED_COLUMNS`` of the same rows, before and after), from its counters
    ``before``: what a restore costs is its own rows, not a sum over the window.

    None when a non-synthetic system message is among them: which one is the
    latest may have changed, and the caller sums the window
    (``window_counters``). ``turns_since_compaction`` is kept; the caller sets it.
    """
    events = real = turns = other = below = above = 0
    for sign, rows in ((-1, was), (1, now)):
        for role, synthetic, archived, tokens, under, over in rows:
            if archived:
                continue
            if role == "system" and not synthetic:
                return None
            events += sign
            real += sign * (not synthetic)
            turns += sign * (role == "user" and not synthetic)
            other += sign * tokens
            below += sign * under
            above += sign * over
    return replace(
        before,
        active_events=before.active_events + events,
        real_events=before.real_events + real,
        turns=before.turns + turns,
        tokens=before.tokens + other,
        pending_below=before.pending_below + below,
        pending_above=before.pending_above + above,
    )


def counters_counted(
    before: SessionCounters, landed: Sequence[tuple[Event, int]]
) -> SessionCounters | None:
    """The window's counters once the exact counts of ``landed`` (each event as it was
    while pending, with its exact count) replace their estimates.

    An archived or cleared event is not in the window's count (a cleared one
    shows its placeholder's). None when a non-synthetic system message is among
    them (never sent pending): the caller sums the window (``window_counters``).
    """
    counters = before
    for event, exact in landed:
        if event.archived or event.cleared:
            continue
        if event.role is Role.SYSTEM and not event.synthetic:
            return None
        counters = counters.after_counting(event, exact)
    return counters
