"""Which sessions the read caches take in: those read again, not every one read once.

The read caches (decoded events in the store, wire bytes and whole answers in
the servicer) pay off when a session's window is read again: an agent reads
its context before every model call. A window read once (an inspector, a
session's last read, a sweep over many sessions) would only push out the
windows that are read again, and hold memory until the bound: 10,000 sessions
each read once filled the default 16 MiB and left the server 11 MiB bigger
(issue 37). So a session is taken in on its second read among the last few
hundred sessions read; an agent's loop pays one more decode per session.

Bounded in count and so in bytes: the keys are session ids (bounded in
length by the API) or row ids.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

BYTES_PER_KEY = 8 << 10
"""A cache of N bytes remembers N / 8 KiB sessions read once: 1,024 for 8 MiB, about as many
as it holds windows of a few turns."""


class SecondRead:
    """Admits a key on its second sighting among the last ``capacity`` keys seen.

    Safe from several threads (the SQLite store's readers share their cache).
    A capacity of 0 admits every key: a cache that small keeps nothing anyway.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def for_bytes(cls, max_bytes: int) -> SecondRead:
        """The doorkeeper of a cache bounded at ``max_bytes``."""
        return cls(max_bytes // BYTES_PER_KEY)

    def __len__(self) -> int:
        return len(self._seen)

    def admits(self, key: Hashable) -> bool:
        """Whether ``key`` was seen before (and is remembered as seen now)."""
        if self.capacity <= 0:
            return True
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return True
            self._seen[key] = None
            if len(self._seen) > self.capacity:
                self._seen.popitem(last=False)
            return False

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
