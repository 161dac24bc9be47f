"""The in-flight budget and a stream's byte-bounded queues, on their own."""

from __future__ import annotations

import asyncio

import pytest

from sidecar.server.inflight import InflightBudget
from sidecar.server.streams import ByteQueue


async def settle() -> None:
    """Let every task that can run, run."""
    for _ in range(5):
        await asyncio.sleep(0)


def admitted(budget: InflightBudget, size: int, order: list[int]) -> asyncio.Task[None]:
    async def admit() -> None:
        await budget.admit(size)
        order.append(size)

    return asyncio.create_task(admit())


async def test_requests_within_the_budget_are_taken_at_once() -> None:
    budget = InflightBudget(100)
    await budget.admit(60)
    await budget.admit(40)
    assert budget.held == 100


async def test_past_the_budget_a_request_waits_until_bytes_are_given_back() -> None:
    budget = InflightBudget(100)
    await budget.admit(80)
    order: list[int] = []
    waiter = admitted(budget, 30, order)
    await settle()
    assert order == []
    assert budget.waiting == 1
    budget.release(10)  # 70 + 30 fits
    await waiter
    assert order == [30]
    assert budget.held == 100


async def test_a_request_larger_than_the_budget_is_taken_alone() -> None:
    budget = InflightBudget(100)
    await budget.admit(500)  # nothing held: taken
    assert budget.held == 500
    budget.release(500)
    await budget.admit(1)
    order: list[int] = []
    big = admitted(budget, 500, order)
    await settle()
    assert order == []  # not beside anything else
    budget.release(1)
    await big
    assert order == [500]


async def test_requests_are_taken_in_arrival_order_so_a_big_one_is_not_starved() -> None:
    budget = InflightBudget(100)
    await budget.admit(90)
    order: list[int] = []
    big = admitted(budget, 80, order)
    await settle()
    small = admitted(budget, 5, order)  # would fit now, but the big one came first
    await settle()
    assert order == []
    budget.release(90)
    await asyncio.gather(big, small)
    assert order == [80, 5]


async def test_a_cancelled_waiter_holds_nothing_and_lets_the_next_in() -> None:
    budget = InflightBudget(100)
    await budget.admit(90)
    order: list[int] = []
    big = admitted(budget, 80, order)
    await settle()
    small = admitted(budget, 10, order)
    await settle()
    assert order == []
    big.cancel()
    with pytest.raises(asyncio.CancelledError):
        await big
    await small  # 90 + 10 fits once the big one is out of the line
    assert order == [10]
    assert budget.held == 100
    assert budget.waiting == 0


async def test_a_waiter_cancelled_as_it_is_admitted_gives_its_bytes_back() -> None:
    budget = InflightBudget(100)
    await budget.admit(100)
    waiter = asyncio.create_task(budget.admit(50))
    await settle()
    budget.release(100)  # admits the waiter: 50 held for it
    waiter.cancel()  # before it resumes
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert budget.held == 0


async def test_answers_are_counted_without_waiting_and_hold_requests_back() -> None:
    budget = InflightBudget(100)
    budget.charge(150)  # an answer that exists already
    assert budget.held == 150
    assert budget.high_water == 150
    order: list[int] = []
    waiter = admitted(budget, 1, order)
    await settle()
    assert order == []
    budget.release(150)
    await waiter
    assert order == [1]


async def test_holding_gives_the_bytes_back_when_the_block_fails() -> None:
    budget = InflightBudget(100)
    seen: list[int] = []

    async def failing_append() -> None:
        async with budget.holding(70):
            seen.append(budget.held)
            raise RuntimeError("the append failed")

    with pytest.raises(RuntimeError):
        await failing_append()
    assert seen == [70]
    assert budget.held == 0


async def test_a_queue_takes_items_while_under_its_bound_and_one_that_crosses_it() -> None:
    queue: ByteQueue[str] = ByteQueue(max_items=10, max_bytes=100)
    await queue.put("a", 60)
    await queue.put("b", 60)  # crosses the bound: taken whole
    assert not queue.has_room()
    assert queue.bytes == 120
    put = asyncio.create_task(queue.put("c", 1))
    await settle()
    assert not put.done()
    assert await queue.get() == ("a", 60)  # 60 left: under the bound again
    await put
    assert queue.drain() == [("b", 60), ("c", 1)]


async def test_an_empty_queue_takes_an_item_of_any_size() -> None:
    queue: ByteQueue[str] = ByteQueue(max_items=10, max_bytes=100)
    await queue.put("huge", 10_000)
    assert len(queue) == 1
    assert not queue.has_room()


async def test_a_queue_bounds_its_count_too() -> None:
    queue: ByteQueue[int] = ByteQueue(max_items=2, max_bytes=1 << 20)
    await queue.put(1, 1)
    await queue.put(2, 1)
    assert not queue.has_room()


async def test_a_closed_queue_gives_what_it_holds_then_none() -> None:
    queue: ByteQueue[str] = ByteQueue(max_items=10, max_bytes=100)
    getter = asyncio.create_task(queue.get())
    await settle()
    await queue.put("last", 1)
    queue.close()
    assert await getter == ("last", 1)
    assert await queue.get() is None


async def test_a_cancelled_get_takes_nothing() -> None:
    queue: ByteQueue[str] = ByteQueue(max_items=10, max_bytes=100)
    getter = asyncio.create_task(queue.get())
    await settle()
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    await queue.put("kept", 1)
    assert await queue.get() == ("kept", 1)


async def test_changes_nobody_waits_for_wake_nobody_and_lose_no_later_wakeup() -> None:
    """A put or get with no task waiting skips the wake-up; one waiting after it still wakes,
    and a cancelled waiter leaves no count behind that would keep waking nobody."""
    queue: ByteQueue[str] = ByteQueue(max_items=1, max_bytes=100)
    await queue.put("a", 1)  # no one waits: nothing to wake
    assert queue.get_nowait() == ("a", 1)
    cancelled = asyncio.create_task(queue.get())
    await settle()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    getters = [asyncio.create_task(queue.get()) for _ in range(2)]
    await settle()
    await queue.put("b", 1)  # full now: the next put waits for a getter to take "b"
    putter = asyncio.create_task(queue.put("c", 1))
    await settle()
    assert [await getter for getter in getters] == [("b", 1), ("c", 1)]
    await putter


async def test_a_quiet_connection_waits_for_one_request_not_one_per_flooding_stream() -> None:
    """Eight streams of one connection each wait with a request; a quiet call goes next."""
    budget = InflightBudget(100)
    await budget.admit(100, "flood")
    order: list[str] = []

    async def admit(key: str, size: int) -> None:
        await budget.admit(size, key)
        order.append(key)

    floods = [asyncio.create_task(admit("flood", 100)) for _ in range(8)]
    await settle()
    quiet = asyncio.create_task(admit("quiet", 10))
    await settle()
    budget.release(100)  # room for one request: the quiet one's turn
    await settle()
    assert order == ["quiet"]  # in arrival order, it came ninth
    await quiet
    for n in range(8):
        budget.release(budget.held)
        await settle()
        assert len(order) == n + 2
    await asyncio.gather(*floods)
    assert order == ["quiet"] + ["flood"] * 8


async def test_connections_take_turns_by_the_bytes_they_were_let_in() -> None:
    budget = InflightBudget(100)
    await budget.admit(100, "a")
    order: list[str] = []

    async def admit(key: str, size: int) -> None:
        await budget.admit(size, key)
        order.append(key)
        await asyncio.sleep(0)
        budget.release(size)  # answered at once

    tasks = [asyncio.create_task(admit("a", 60)) for _ in range(4)]
    tasks += [asyncio.create_task(admit("b", 20)) for _ in range(6)]
    await settle()
    budget.release(100)
    await asyncio.gather(*tasks)
    # b asks for a third of a's bytes a request: it is let in about three times as often.
    assert order.count("b") == 6
    assert order.index("b") < order.index("a")  # a had just been let in 100 bytes
    assert budget.held == 0
    assert budget.waiting == 0


async def test_a_quiet_tenant_waits_for_one_request_not_one_per_connection_of_a_flood() -> None:
    """Tenant a floods on eight connections, one request waiting on each; b's goes next."""
    budget = InflightBudget(100)
    await budget.admit(100, "a-0", tenant="a")
    order: list[str] = []

    async def admit(connection: str, tenant: str) -> None:
        await budget.admit(100, connection, tenant)
        order.append(connection)

    floods = [asyncio.create_task(admit(f"a-{n}", "a")) for n in range(8)]
    await settle()
    quiet = asyncio.create_task(admit("b-0", "b"))
    await settle()
    budget.release(100)  # room for one request: the quiet tenant's turn
    await settle()
    assert order == ["b-0"]  # by connection, every one of a's was as far behind as b's
    await quiet
    for n in range(8):
        budget.release(budget.held)
        await settle()
        assert len(order) == n + 2
    await asyncio.gather(*floods)
    # Among a's connections, by their own clocks: a-0 had just been let in 100 bytes.
    assert order[1:] == [f"a-{n}" for n in range(1, 8)] + ["a-0"]


async def test_a_tenants_connections_take_turns_within_its_share() -> None:
    """Within tenant a, a quiet connection goes ahead of a flooding one; a and b alternate."""
    budget = InflightBudget(10)
    await budget.admit(10, "b-0", tenant="b")
    order: list[str] = []

    async def admit(connection: str, tenant: str) -> None:
        await budget.admit(10, connection, tenant)
        order.append(connection)
        await asyncio.sleep(0)
        budget.release(10)  # answered at once

    tasks = [asyncio.create_task(admit("a-flood", "a")) for _ in range(4)]
    tasks += [asyncio.create_task(admit("b-0", "b")) for _ in range(3)]
    await settle()
    tasks.append(asyncio.create_task(admit("a-quiet", "a")))
    await settle()
    budget.release(10)
    await asyncio.gather(*tasks)
    # The tenants take turns by bytes (b had just been let in; a tie goes to the one
    # that waited first). a's first turn goes to its flooding connection, which asked
    # first; its second to the quiet one, though it came after all four of the flood's.
    assert order == ["a-flood", "a-quiet", "b-0", "a-flood", "b-0", "a-flood", "b-0", "a-flood"]
    assert budget.held == 0
    assert budget.waiting == 0


async def test_without_tenants_requests_are_fair_between_connections_alone() -> None:
    """With no tenant named, every call is of one tenant: per connection, as before."""
    budget = InflightBudget(100)
    await budget.admit(100, "x")
    order: list[str] = []

    async def admit(connection: str) -> None:
        await budget.admit(100, connection)
        order.append(connection)

    tasks = [asyncio.create_task(admit("x")) for _ in range(3)]
    await settle()
    tasks.append(asyncio.create_task(admit("y")))
    await settle()
    for _ in range(4):
        budget.release(budget.held)
        await settle()
    await asyncio.gather(*tasks)
    assert order == ["y", "x", "x", "x"]
