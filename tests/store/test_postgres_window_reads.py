"""PostgreSQL: a big window is decoded off the event loop, in chunks of one snapshot.

asyncpg hands rows over on the loop; decoding 200,000 of them there would
hold every other session's call for a second or more. A window past
``WINDOW_CHUNK_ROWS`` events is read from a cursor in chunks, each decoded on
a worker thread; a small one is one fetch decoded in place. Either way the
window is exactly the one a plain read gives, in log order.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sidecar.model import Event, Role
from sidecar.store import postgres_reads
from sidecar.store.event_cache import DecodedEvents
from sidecar.store.postgres import PostgresStore
from tests.conftest import Postgres, scratch_database

BIG = postgres_reads.WINDOW_CHUNK_ROWS * 2 + 5


class WhereDecoded(DecodedEvents):
    """The cache, noting the threads it decodes on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def event(self, row_id: int, columns: Sequence[Any]) -> Event:
        self.threads.add(threading.current_thread().name)
        return super().event(row_id, columns)


def _events(session: str, count: int) -> list[Event]:
    return [
        Event(id=f"{session}{i}", role=Role.USER if i % 2 == 0 else Role.ASSISTANT, text=f"m {i}")
        for i in range(count)
    ]


async def test_a_big_window_is_decoded_on_threads_and_a_small_one_in_place(
    postgres: Postgres,
) -> None:
    async with scratch_database(postgres) as dsn:
        store = PostgresStore(dsn, pool_size=2)
        await store.open()
        try:
            big = _events("b", BIG)
            for start in range(0, BIG, 1_000):
                await store.append("big", big[start : start + 1_000], create_if_missing=True)
            await store.append("small", _events("s", 10), create_if_missing=True)
            spy = WhereDecoded()
            store._decoded = spy  # the store's own cache, watched
            loop_thread = threading.current_thread().name
            for session_id in ("big", "small"):  # read once: the cache takes them in from now
                await store.active_window(session_id)

            _, window = await store.active_window("big")
            assert [e.id for e in window] == [e.id for e in big]
            assert [e.position for e in window] == list(range(1, BIG + 1))
            assert spy.threads
            assert loop_thread not in spy.threads
            _, again = await store.active_window("big")  # through the cache now
            assert again == window

            spy.threads.clear()
            _, small = await store.active_window("small")
            assert [e.id for e in small] == [f"s{i}" for i in range(10)]
            assert spy.threads == {loop_thread}
        finally:
            await store.close()
