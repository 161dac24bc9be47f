"""The active window a compaction's result carries: listed while it is small.

Compact, RestoreCompaction, WatchSession and an append that set off a pass
answer with the session's new active window, so a client can go on without
another read. On a window of a few hundred events that is what it wants; on
one of 200,000 it is 200,000 rows read and decoded, 200,000 messages built,
tens of megabytes sent, for a pass that changed two events, and paid again
by every watcher. So a result lists the window only while it holds at most
``ANSWER_WINDOW_EVENTS`` events; past that it comes with
``active_events_omitted`` set and the client reads the window it needs with
GetContext (bounded by its own limits, with ``event_offset`` to page it) or
ListEvents. What the pass changed is listed whatever the window's size:
``archived_events``, ``cleared_event_ids``, ``restored_event_ids``, the
version and the counts (each still under the answer's byte bound, see
``sidecar.server.answers``).

The decision is the session header's ``active_events`` counter, kept exact
by the store: nothing of the window is read to make it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sidecar.model import CompactionResult, Event, Session
from sidecar.store.protocol import Store

ANSWER_WINDOW_EVENTS = 1_000
"""The most events a compaction's result lists as its new active window."""


Listed = tuple[tuple[Event, ...], bool]
"""A result's window as it is listed, and whether it was left out."""


def listed(window: Sequence[Event]) -> Listed:
    """``window`` as a result lists it."""
    if len(window) > ANSWER_WINDOW_EVENTS:
        return (), True
    return tuple(window), False


async def window_after(store: Store, session_id: str, session: Session) -> Listed:
    """The window ``session`` (as a write just left it) lists in a result: read now (the
    caller holds the session's lock, so no pass lands in between), or left out."""
    if session.counters.active_events > ANSWER_WINDOW_EVENTS:
        return (), True
    _, window = await store.active_window(session_id)
    return listed(window)  # appends may land between the write and this read


def with_window(result: CompactionResult, window: Listed) -> CompactionResult:
    """``result`` listing ``window``."""
    events, omitted = window
    return replace(result, active_events=events, active_events_omitted=omitted)
