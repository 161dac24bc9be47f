"""Writes waiting for the SQLite writer, served fairly between tenants, then sessions.

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

In multi-tenant mode that is done in two levels, as CFS does for groups of
threads: a tenant's clock advances by the weight of all its sessions'
writes, the writer takes from the tenant whose clock is lowest, and within
it from the session whose clock is lowest. Per session alone, a tenant
writing to eight sessions would get eight shares of the writer to a quiet
tenant's one. The tenant is the namespace of the stored session id
(``sidecar.model.namespace_of``); without tenants every id is in the one
namespace "", and the queue is fair between sessions alone.

Groups are bounded in weight as well as in number (``MAX_GROUP_WEIGHT``,
``MAX_GROUP``) so the group a write joins commits soon: a quiet write waits
for about the group being committed and its own; and a group does not take
a write much heavier than itself (``HEAVIER_THAN_GROUP``), so a light write
served first is not held for a heavy one's body.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

from sidecar.model import namespace_of

MAX_GROUP = 256
"""Writes committed together at most."""

MAX_GROUP_WEIGHT = 16
"""Weight (events, or 16 KiB of event content) a group takes at most.

A write heavier than that forms a group of its own.
"""

HEAVIER_THAN_GROUP = 2
"""A group takes no write more than this many times its weight so far.

The queue serves a quiet session's light write first; joined by a flood's
16-event batch, it would commit only after that batch's body. Alone, it
waits for the group being committed and its own one-write group: under
eight flooding streams a probe's append p50 fell from 5.9-7.5 to 3.5-4.2 ms
and its p99 from 16.8-19.2 to 13.1-13.4 (``bench.latency``, two runs each
by turns). A heavy write first still takes the light ones after it: they
would wait for it anyway.
"""

WEIGHT_BYTES = 16 << 10
"""Event content bytes that weigh as much as one event."""

IDLE_KEPT = 64
"""Clocks of keys with nothing queued kept beyond twice the queued work, at each level."""


def write_weight(events: int, content_bytes: int = 0) -> int:
    """What a write of ``events`` events carrying ``content_bytes`` weighs (at least 1)."""
    return max(1, events + content_bytes // WEIGHT_BYTES)


@dataclass(order=True, slots=True)
class _Queued:
    start: int
    seq: int
    weight: int = field(compare=False)
    item: Any = field(compare=False)


class _Sessions:
    """One namespace's queued writes, tagged per session on the namespace's own virtual time."""

    __slots__ = ("_finish", "_heap", "_now", "_seq", "credit")

    def __init__(self, credit: int) -> None:
        self.credit = credit
        self._heap: list[_Queued] = []
        self._finish: dict[str, int] = {}  # per session: the virtual time its queued work ends
        self._now = 0  # virtual time: the highest start tag taken so far
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def put(self, key: str, weight: int, item: Any) -> None:
        """Queue ``item`` after the session's own work, at most ``credit`` behind the present."""
        floor = self._now - self.credit
        start = max(floor, self._finish.get(key, floor))
        self._finish[key] = start + weight
        heapq.heappush(self._heap, _Queued(start, next(self._seq), weight, item))

    def next_weight(self) -> int:
        """The weight of the write ``take`` would return."""
        return self._heap[0].weight

    def take(self) -> Any:
        """The write whose session's clock is lowest."""
        queued = heapq.heappop(self._heap)
        self._now = max(self._now, queued.start)
        # A session whose work ended before now would be tagged at most ``credit``
        # earlier if forgotten: a bounded gift, and it bounds the table by the
        # sessions with work queued or served just now.
        if len(self._finish) > 2 * len(self._heap) + IDLE_KEPT:
            self._finish = {k: f for k, f in self._finish.items() if f > self._now}
        return queued.item


class FairQueue:
    """Items keyed by stored session id, taken in groups: lowest tenant, then session, first."""

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
        self._spaces: dict[str, _Sessions] = {}
        self._turns: list[tuple[int, int, str]] = []
        """Namespaces with writes queued, by the virtual start of their next write."""
        self._finish: dict[str, int] = {}  # per namespace: the virtual time its last write ended
        self._now = 0  # virtual time between namespaces: the highest start taken so far
        self._seq = itertools.count()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def put(self, key: str, weight: int, item: Any) -> None:
        """Queue ``item`` after its session's own work, each level at most ``credit`` behind."""
        space = namespace_of(key)
        sessions = self._spaces.get(space)
        if sessions is None:
            sessions = self._spaces[space] = _Sessions(self.credit)
        if not sessions:  # its namespace starts waiting: after its own work, credit bounded
            floor = self._now - self.credit
            start = max(floor, self._finish.get(space, floor))
            heapq.heappush(self._turns, (start, next(self._seq), space))
        sessions.put(key, weight, item)
        self._count += 1

    def take_group(self) -> list[Any]:
        """The next group: lowest tags first, until it is full in number or in weight."""
        group: list[Any] = []
        weight = 0
        while self._turns and len(group) < self.max_group:
            start, _, space = self._turns[0]
            sessions = self._spaces[space]
            next_weight = sessions.next_weight()
            if group and weight + next_weight > self.max_group_weight:
                break
            if group and next_weight > HEAVIER_THAN_GROUP * weight:
                break  # the lighter writes taken so far commit without its body
            heapq.heappop(self._turns)
            self._now = max(self._now, start)
            group.append(sessions.take())
            weight += next_weight
            # The namespace's clock moves on by what it wrote; with more queued, it
            # waits again from there.
            self._finish[space] = start + next_weight
            if sessions:
                heapq.heappush(self._turns, (start + next_weight, next(self._seq), space))
        self._count -= len(group)
        self._forget_idle()
        return group

    def _forget_idle(self) -> None:
        # As within a namespace (``_Sessions.take``): an idle namespace forgotten is
        # credited at most ``credit``, and its sessions' clocks go with it.
        if len(self._finish) > 2 * len(self._turns) + IDLE_KEPT:
            self._finish = {k: f for k, f in self._finish.items() if f > self._now}
            self._spaces = {k: s for k, s in self._spaces.items() if s or k in self._finish}
