"""The SQLite writer's queue: fair between sessions, in order within one, groups bounded."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from sidecar.model import Event, Role, new_event_id
from sidecar.store.fair_queue import FairQueue, write_weight
from sidecar.store.sqlite import SqliteStore


def taken(queue: FairQueue) -> list[list[str]]:
    groups = []
    while queue:
        groups.append(queue.take_group())
    return groups


def test_a_quiet_session_goes_ahead_of_a_flood_queued_before_it() -> None:
    queue = FairQueue(max_group_weight=16)
    for n in range(8):  # eight flooding sessions, eight 16-event batches each
        for b in range(8):
            queue.put(f"flood-{n}", 16, f"flood-{n}/{b}")
    for _ in range(16):  # the writer has served two of each: it is busy with the next
        queue.take_group()
    queue.put("quiet", 1, "quiet")
    assert taken(queue)[0] == ["quiet"]


def test_each_sessions_writes_keep_their_order() -> None:
    queue = FairQueue(max_group_weight=4)
    for b in range(5):
        for key, weight in (("a", 3), ("b", 1), ("c", 2)):
            queue.put(key, weight, f"{key}{b}")
    order = [item for group in taken(queue) for item in group]
    for key in "abc":
        assert [i for i in order if i[0] == key] == [f"{key}{b}" for b in range(5)]


def test_backlogged_sessions_share_the_writer_by_weight() -> None:
    queue = FairQueue(max_group_weight=8)
    for b in range(40):
        queue.put("heavy", 8, f"h{b}")
        queue.put("light", 1, f"l{b}")
    first = [item for group in taken(queue)[:10] for item in group]
    heavy = sum(8 for item in first if item[0] == "h")
    light = sum(1 for item in first if item[0] == "l")
    # By weight, not by count: the light session is not held to one write per heavy one.
    assert light >= 30
    assert heavy >= 8 * 4


def test_a_group_is_bounded_in_weight_but_takes_one_write_of_any_weight() -> None:
    queue = FairQueue(max_group_weight=16)
    queue.put("a", 100, "huge")
    queue.put("b", 10, "b1")
    queue.put("c", 10, "c1")
    assert taken(queue) == [["huge"], ["b1"], ["c1"]]
    for n in range(20):
        queue.put(f"s{n}", 1, f"s{n}")
    assert [len(g) for g in taken(queue)] == [16, 4]


def test_a_light_write_served_first_is_not_held_for_a_much_heavier_one() -> None:
    queue = FairQueue(max_group_weight=16)
    queue.put("quiet", 1, "quiet")
    queue.put("flood", 15, "batch")
    assert taken(queue) == [["quiet"], ["batch"]]
    # A heavy write served first takes the light ones after it; growing ones join.
    queue = FairQueue(max_group_weight=16)
    queue.put("flood", 12, "batch")
    queue.put("a", 1, "a")
    queue.put("b", 2, "b")
    assert taken(queue) == [["batch", "a", "b"]]
    queue = FairQueue(max_group_weight=16)
    for key, weight in (("c", 3), ("d", 6), ("e", 7)):
        queue.put(key, weight, key)
    assert taken(queue) == [["c", "d", "e"]]  # 6 <= 2 x 3, 7 <= 2 x 9


def test_a_returning_session_is_credited_at_most_one_group() -> None:
    queue = FairQueue(max_group_weight=4)
    for b in range(50):
        queue.put("busy", 4, f"busy{b}")
    for _ in range(25):
        queue.take_group()
    # Idle until now: it goes first, but its own backlog then alternates with busy's.
    for b in range(6):
        queue.put("back", 4, f"back{b}")
    order = [group[0] for group in taken(queue)[:6]]
    assert order[0] == "back0"
    assert 2 <= sum(item.startswith("back") for item in order) <= 4


def test_the_table_of_sessions_stays_bounded() -> None:
    queue = FairQueue()
    for n in range(10_000):
        queue.put(f"s{n}", 1, n)
        queue.take_group()
    assert len(queue._spaces[""]._finish) <= 64 + 2


def test_the_tables_of_tenants_and_their_sessions_stay_bounded() -> None:
    queue = FairQueue()
    for n in range(10_000):
        queue.put(f"t{n}#s", 1, n)
        queue.put(f"t{n % 3}#s{n}", 1, n)
        queue.take_group()
    assert len(queue) == 0
    assert len(queue._finish) <= 64 + 2
    assert len(queue._spaces) <= 64 + 2
    assert all(len(sessions._finish) <= 64 + 2 for sessions in queue._spaces.values())


def test_a_tenant_flooding_eight_sessions_gets_one_share_of_the_writer_not_eight() -> None:
    """Tenant a keeps eight sessions backlogged, tenant b one: b gets half the writes."""
    queue = FairQueue(max_group_weight=16)
    for b in range(8):
        for n in range(8):
            queue.put(f"a#flood-{n}", 16, f"a{n}/{b}")
        queue.put("b#busy", 16, f"b/{b}")
    first = [item for group in taken(queue)[:8] for item in group]
    assert sum(item.startswith("b") for item in first) == 4  # by session alone: 1 in 9
    assert [item for item in first if item.startswith("b")] == [f"b/{b}" for b in range(4)]


def test_within_a_tenant_a_quiet_session_goes_ahead_of_its_flooding_ones() -> None:
    queue = FairQueue(max_group_weight=16)
    for b in range(8):
        for n in range(8):
            queue.put(f"a#flood-{n}", 16, f"flood-{n}/{b}")
        queue.put("b#busy", 16, f"b/{b}")
    for _ in range(16):
        queue.take_group()
    queue.put("a#quiet", 1, "quiet")
    # a's next turn is the quiet session's; b may have the turn before it.
    assert "quiet" in [item for group in taken(queue)[:2] for item in group]


def test_a_returning_tenant_is_credited_at_most_one_group() -> None:
    queue = FairQueue(max_group_weight=4)
    for b in range(50):
        queue.put("a#busy", 4, f"busy{b}")
    for _ in range(25):
        queue.take_group()
    for b in range(6):
        queue.put(f"b#back-{b}", 4, f"back{b}")  # six sessions of its own: one share still
    order = [group[0] for group in taken(queue)[:6]]
    assert order[0] == "back0"
    assert 2 <= sum(item.startswith("back") for item in order) <= 4


def test_write_weight_counts_events_and_bytes() -> None:
    assert write_weight(0) == 1
    assert write_weight(3) == 3
    assert write_weight(1, 1 << 20) == 1 + 64


async def test_a_quiet_append_commits_before_a_flood_queued_ahead_of_it(tmp_path: Path) -> None:
    """End to end on the store: the writer busy, 8 sessions' batches queued, then a quiet one."""
    store = SqliteStore(str(tmp_path / "fair.db"))
    await store.open()
    try:
        committed: list[str] = []

        async def append(session: str, n: int) -> None:
            batch = [Event(id=new_event_id(), role=Role.USER, text="x" * 200) for _ in range(n)]
            await store.append(session, batch, create_if_missing=True)
            committed.append(session)

        for _ in range(3):  # the floods have been writing for a while
            await asyncio.gather(*(append(f"flood-{s}", 16) for s in range(8)))
        committed.clear()
        release = threading.Event()
        assert store._writer is not None
        blocker = asyncio.create_task(store._write(lambda db: release.wait(10)))
        await asyncio.sleep(0.05)  # the writer is now inside the blocking write

        floods = [asyncio.create_task(append(f"flood-{s}", 16)) for s in range(8)]
        await asyncio.sleep(0)
        quiet = asyncio.create_task(append("quiet", 1))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(blocker, quiet, *floods)
        assert committed.index("quiet") == 0, committed
    finally:
        await store.close()
