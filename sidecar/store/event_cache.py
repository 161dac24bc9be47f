"""Events already decoded from their rows, reused while the row is unchanged.

Reading an active window is the hot path (every model call asks for one),
and most of its cost is decoding each row's JSON into an Event, although
between two reads of a window almost every row is the same. An event row
never changes in place except for its ``archived`` flag, so a decoded event
can be reused whenever the row read now is equal, column for column, to the
row it was decoded from. Comparing the whole row (the content string
included: a memcmp) instead of trusting the row id keeps this right even if
SQLite reuses the id of a deleted row for another event.

Bounded by an estimate of the memory it holds (see ``ENTRY_OVERHEAD``); when
full it starts over, which costs one decode per row, never a wrong answer.
It takes in a session's rows from its second read on
(``sidecar.cache_admission``): a window read once is decoded and forgotten.
Both stores keep one.
The SQLite store's reader threads share theirs: each operation is one
dictionary access, atomic under the GIL, and a lost race only costs a decode.
Handing out the same Event object for an unchanged row also lets GetContext
reuse that event's wire bytes (``sidecar/server/context_cache.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.cache_admission import SecondRead
from sidecar.model import Event
from sidecar.store.codec import decode_event

DEFAULT_MAX_BYTES = 32 << 20

ENTRY_OVERHEAD = 768
"""Bytes an entry holds beyond its content, measured with tracemalloc: the row
tuple, the Event, its datetime and id. The content itself is held twice (the
row's JSON and the decoded text), so an entry is charged ``2 * content + 768``."""


class DecodedEvents:
    """Decoded events by row id, each with the row it was decoded from."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._by_row: dict[int, tuple[Sequence[Any], Event]] = {}
        self._bytes = 0
        self._admission = SecondRead.for_bytes(max_bytes)

    def __len__(self) -> int:
        return len(self._by_row)

    @property
    def bytes_held(self) -> int:
        """Content bytes of the events held (what the bound counts)."""
        return self._bytes

    def for_session(self, session_pk: int) -> DecodedEvents | None:
        """This cache, for a read of the session's rows from its second read on; else None."""
        return self if self._admission.admits(session_pk) else None

    def event(self, row_id: int, columns: Sequence[Any]) -> Event:
        """The Event of ``columns`` (``decode_event``'s arguments), decoded at most once."""
        known = self._by_row.get(row_id)
        if known is not None and known[0] == columns:
            return known[1]
        event = decode_event(*columns)
        size = 2 * len(columns[2]) + ENTRY_OVERHEAD
        if size > self.max_bytes:  # never kept (and a bound of 0 keeps nothing)
            return event
        if self._bytes + size > self.max_bytes:
            self._by_row = {}
            self._bytes = 0
        self._by_row[row_id] = (columns, event)
        self._bytes += size
        return event

    def clear(self) -> None:
        self._by_row = {}
        self._bytes = 0
        self._admission.clear()
