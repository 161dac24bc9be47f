"""Where a cut may land: the one rule every strategy shares.

A strategy proposes a cut, an index into the real conversation events:
``real[:cut]`` would be archived, ``real[cut:]`` kept. ``settle_cut`` moves it
to the nearest safe place:

- TURN: the cut snaps forward to the next turn start (USER event); when there
  is none, to the newest turn start, so the newest turn is always kept; with no
  turn start at all nothing is archived.
- TOOL_PAIR: the cut may stay inside a turn, but it never separates a tool
  result from the assistant event that requested it (it moves back to that
  request); orphan results at the cut, whose request is nowhere, are archived
  with the older events; a request of the newest turn still waiting for its
  result is never archived.

Under both, a kept tool result whose request lies before the cut pulls the cut
back (under TURN, to the start of the request's turn), so no tool result is
ever kept without its call — even when a slow tool answers after the user has
spoken again.

``settle_head_cut`` settles a cut on the window's head alone (see
``sidecar.compaction.head``): what lies after the head is summed up by the
earliest head request that one of its results answers.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from sidecar.model import Boundary, Event


def turn_starts(real: Sequence[Event]) -> list[int]:
    """Indexes of the turn starts (non-synthetic USER events)."""
    return [i for i, event in enumerate(real) if event.is_turn_start]


def _request_of_results(real: Sequence[Event]) -> list[int | None]:
    """For each event, the earliest index of a request one of its tool results answers.

    ``None`` for events without results, and for orphan results (no request
    before them in ``real``).
    """
    requested_at: dict[str, int] = {}
    needs: list[int | None] = []
    for index, event in enumerate(real):
        need: int | None = None
        for result in event.tool_results:
            at = requested_at.get(result.call_id)
            if at is not None and (need is None or at < need):
                need = at
        needs.append(need)
        for call in event.tool_calls:
            requested_at[call.id] = index
    return needs


def _suffix_min(needs: Sequence[int | None]) -> list[int | None]:
    """``out[i]`` is the earliest request needed by any result at index >= i."""
    out: list[int | None] = [None] * (len(needs) + 1)
    running: int | None = None
    for index in range(len(needs) - 1, -1, -1):
        need = needs[index]
        if need is not None and (running is None or need < running):
            running = need
        out[index] = running
    return out


def _earliest_pending_request(real: Sequence[Event], start: int) -> int | None:
    """Index of the first event at or after ``start`` with a call not yet answered."""
    answered = {result.call_id for event in real[start:] for result in event.tool_results}
    for index in range(start, len(real)):
        if any(call.id not in answered for call in real[index].tool_calls):
            return index
    return None


def settle_cut(real: Sequence[Event], cut: int, boundary: Boundary) -> int:
    """Move a proposed cut to the nearest safe place (see the module docstring).

    Returns 0 when nothing may be archived. A proposed cut of 0 or less means
    everything fits, and stays 0.
    """
    if cut <= 0 or not real:
        return 0
    starts = turn_starts(real)
    needs = _request_of_results(real)
    earliest_need = _suffix_min(needs)
    if boundary is Boundary.TURN:
        return _settle_on_turn(starts, earliest_need, cut)
    return _settle_on_tool_pair(real, starts, needs, earliest_need, cut)


def settle_head_cut(
    head: Sequence[Event],
    cut: int,
    boundary: Boundary,
    *,
    beyond: int | None,
    real_events: int,
    turns: int,
) -> int | None:
    """``settle_cut(real, cut, boundary)`` where ``head`` is ``real``'s start, or None.

    ``real`` holds ``real_events`` events and ``turns`` turn starts.
    ``beyond`` is the earliest index of ``head`` whose request a result after
    the head answers (None: none does). None when only more of the window can
    tell where the cut lands: it would snap forward past the head, or (under
    TOOL_PAIR) the newest turn, whose waiting requests hold the cut, starts
    inside the head.
    """
    if cut <= 0:
        return 0
    starts = turn_starts(head)
    needs = _request_of_results(head)
    earliest_need = _suffix_min(needs)
    if beyond is not None:
        earliest_need = [beyond if need is None else min(need, beyond) for need in earliest_need]
    if boundary is Boundary.TURN:
        if bisect.bisect_left(starts, cut) == len(starts):
            return None
        return _settle_on_turn(starts, earliest_need, cut)
    last = real_events - 1
    cut = min(cut, last)
    if cut >= len(head) or len(starts) == turns:
        return None
    # The newest turn starts past the head, so its waiting requests lie past the cut.
    while cut < last and head[cut].tool_results and needs[cut] is None and not head[cut].tool_calls:
        cut += 1
        if cut == len(head):
            return None
    return _back_to_requests(earliest_need, cut)


def _settle_on_turn(starts: list[int], earliest_need: list[int | None], cut: int) -> int:
    if not starts:
        return 0
    at = bisect.bisect_left(starts, cut)
    cut = starts[at] if at < len(starts) else starts[-1]
    while cut > 0:
        need = earliest_need[cut]
        if need is None or need >= cut:
            return cut
        # A kept result answers a call of an older turn: keep that whole turn.
        at = bisect.bisect_right(starts, need) - 1
        cut = starts[at] if at >= 0 else 0
    return 0


def _settle_on_tool_pair(
    real: Sequence[Event],
    starts: list[int],
    needs: list[int | None],
    earliest_need: list[int | None],
    cut: int,
) -> int:
    last = len(real) - 1
    cut = min(cut, last)
    pending = _earliest_pending_request(real, starts[-1] if starts else 0)
    if pending is not None:
        cut = min(cut, pending)
    # Orphan results at the cut have no request to keep them company: archive them.
    while cut < last and real[cut].tool_results and needs[cut] is None and not real[cut].tool_calls:
        cut += 1
    return _back_to_requests(earliest_need, cut)


def _back_to_requests(earliest_need: list[int | None], cut: int) -> int:
    """Under TOOL_PAIR: move the cut back to the earliest request a kept result answers."""
    while cut > 0:
        need = earliest_need[cut]
        if need is None or need >= cut:
            return cut
        cut = need
    return 0
