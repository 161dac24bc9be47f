"""Append to one SqliteStore file until killed, printing each acknowledged event id.

Run by test_crash.py as ``python -m tests.store.crash_writer PATH RUN``. A line
is printed (and flushed) only after the append that wrote it returned, so
every printed id is one the store acknowledged. Every 25 batches it also
compacts, archiving all but the newest events and inserting a summary, so a
kill can land inside a compaction transaction too.
"""

from __future__ import annotations

import asyncio
import sys

from sidecar.model import CompactionPlan, Event, Role
from sidecar.store.sqlite import SqliteStore

SESSION = "crash"
KEEP = 6


async def compact(store: SqliteStore, run: str, n: int) -> None:
    """Archive all but the newest KEEP events (the previous summary too); summarize before them."""
    session, window = await store.active_window(SESSION)
    if len(window) <= KEEP:
        return
    summary = Event(id=f"{run}-sum-{n}", role=Role.ASSISTANT, text="summary", token_count=2)
    plan = CompactionPlan(
        strategy="crash",
        archive_ids=tuple(e.id for e in window[:-KEEP]),
        inserts=(summary,),
        insert_before=window[-KEEP].id,  # an appended event: summaries sit before the kept ones
        base_compaction_id=session.last_compaction_id,
    )
    await store.apply(SESSION, plan)


async def main(path: str, run: str) -> None:
    store = SqliteStore(path)
    await store.open()
    n = 0
    batch_number = 0
    while True:
        size = 1 + batch_number % 3
        batch = [
            Event(
                id=f"{run}-{n + i}",
                role=Role.USER if (n + i) % 2 == 0 else Role.ASSISTANT,
                text=f"event {n + i} of run {run}",
                token_count=5,
            )
            for i in range(size)
        ]
        await store.append(SESSION, batch, create_if_missing=True)
        sys.stdout.write("".join(f"{e.id}\n" for e in batch))
        sys.stdout.flush()
        n += size
        batch_number += 1
        if batch_number % 25 == 0:
            await compact(store, run, batch_number)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
