"""Writes waiting for the SQLite writer, served fairly between sessions.

SQLite has one writer, so every write waits behind the ones queued before
it. Served first come, first served, a session that floods (eight streams
each keeping sixteen appends in flight) makes a quiet session's one-event
append wait behind every batch of theirs. Instead the queue is served by
fair queueing on virtual time, as CFS schedules threads: each session's
writes advance its own clock by their weight (the events and bytes they
write), and the writer takes the write whose session's clock is lowest. A
session that has written little lately is behind, so it goes ahead of the
backlog of those that wrote a lot; each session's own writes keep their
order. A session returning after a pause is credited at most ``credit``
(one group's weight) behind the present, so it cannot save up a turn
that would shut the others out.

Groups are bounded in weight as well as in number (``MAX_GROUP_WEIGHT``,
``MAX_GROUP``) so the group a write joins commits soon: a quiet write waits
for about the group being committed and its own.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

MAX_GROUP = 256
"""Writes committed together at most."""

MAX_GROUP_WEIGHT = 16
"""Weight (events, or 16 KiB of event content) a group takes at most.

A write heavier than that forms a group of its own.
"""

WEIGHT_BYTES = 16 << 10
"""Event content bytes that weigh as much as one event."""


def write_weight(events: int, content_bytes: int = 0) -> int:
    """What a write of ``events`` events carrying ``content_bytes`` weighs (at least 1)."""
    return max(1, events + content_bytes // WEIGHT_BYTES)


@dataclass(order=True, slots=True)
class _Queued:
    start: int
    seq: int
    weight: int = field(compare=False)
    item: Any = field(compare=False)


class FairQueue:
    """Items keyed by session, taken in groups, lowest virtual start first."""

    def __init__(
        self,
        *,
        max_group: int = MAX_GROUP,
        max_group_weight: int = MAX_GROUP_WEIGHT,
        credit: int | None = None,
    ) -> None:
        self.max_group = max_group
        self.max_group_weight = max_group_weight
        self.credit = max_group_weight if credit is None else credit
        self._heap: list[_Queued] = []
        self._finish: dict[str, int] = {}  # per key: the virtual time its queued work ends
        self._now = 0  # virtual time: the highest start tag taken so far
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def put(self, key: str, weight: int, item: Any) -> None:
        """Queue ``item``: after the key's own work, and at most ``credit`` behind the present."""
        floor = self._now - self.credit
        start = max(floor, self._finish.get(key, floor))
        self._finish[key] = start + weight
        heapq.heappush(self._heap, _Queued(start, next(self._seq), weight, item))

    def take_group(self) -> list[Any]:
        """The next group: lowest tags first, until it is full in number or in weight."""
        group: list[Any] = []
        weight = 0
        while self._heap and len(group) < self.max_group:
            if group and weight + self._heap[0].weight > self.max_group_weight:
                break
            queued = heapq.heappop(self._heap)
            self._now = max(self._now, queued.start)
            group.append(queued.item)
            weight += queued.weight
        self._forget_idle()
        return group

    def _forget_idle(self) -> None:
        # A key whose work ended before now would be tagged at most ``credit``
        # earlier if forgotten: a bounded gift, and it bounds the table by the
        # keys with work queued or served just now.
        if len(self._finish) > 2 * len(self._heap) + 64:
            self._finish = {k: f for k, f in self._finish.items() if f > self._now}
