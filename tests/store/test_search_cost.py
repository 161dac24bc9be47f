"""A search page ranks one block of matches, not every match: its cost follows the page.

Ranking scored every match before the first page was cut from it, so a query
matching most of a big log cost the whole log on every page. A page now ranks
the newest ``SEARCH_BLOCK`` matches past the blocks before it (made small
here): every match still comes back exactly once, each page in rank order
within its block, and the work of a page is the same for 300 matches as for
3,000.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from sidecar.model import Event, Role
from sidecar.store import paging, postgres_reads, sqlite_reads
from sidecar.store.postgres import PostgresStore
from sidecar.store.protocol import SearchHit, SearchQuery, Store
from sidecar.store.sqlite import SqliteStore
from tests.conftest import Postgres, scratch_database

BLOCK = 100


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (paging, sqlite_reads, postgres_reads):
        monkeypatch.setattr(module, "SEARCH_BLOCK", BLOCK, raising=False)


def _event(session: str, i: int) -> Event:
    # Ranks differ: the needle repeats 1 to 5 times among other words.
    text = " ".join(["needle"] * (1 + i % 5) + [f"hay{i}"] * 3)
    return Event(id=f"{session}-{i}", role=Role.USER, text=text, token_count=5)


async def _fill(store: Store, sessions: dict[str, int]) -> None:
    await store.open()
    try:
        for session, count in sessions.items():
            for start in range(0, count, 1_000):
                batch = [_event(session, i) for i in range(start, min(count, start + 1_000))]
                await store.append(session, batch, create_if_missing=True)
        # A search indexes everything pending first: the raw connections below find it all.
        await store.search(
            SearchQuery(text="needle", include_active=True), page_size=1, page_token=""
        )
    finally:
        await store.close()


async def _all_pages(store: Store, session: str) -> list[list[SearchHit]]:
    pages: list[list[SearchHit]] = []
    token = ""
    while True:
        query = SearchQuery(text="needle", session_id=session, include_active=True)
        page = await store.search(query, page_size=40, page_token=token)
        pages.append(list(page.items))
        token = page.next_page_token
        if not token:
            return pages


async def _check_every_match_once(store: Store) -> None:
    await store.open()
    try:
        pages = await _all_pages(store, "few")
    finally:
        await store.close()
    ids = [hit.event.id for page in pages for hit in page]
    assert sorted(ids) == sorted(f"few-{i}" for i in range(250))
    # 250 matches, blocks of 100: 40 + 40 + 20, twice, then 40 + 10.
    assert [len(page) for page in pages] == [40, 40, 20, 40, 40, 20, 40, 10]
    seen = 0
    for page in pages:
        ranks = [hit.rank for hit in page]
        assert ranks == sorted(ranks, reverse=True), ranks
        seen += len(page)
    # The first block holds the newest matches.
    first_block = {hit.event.id for page in pages[:3] for hit in page}
    assert first_block == {f"few-{i}" for i in range(150, 250)}


async def test_sqlite_pages_rank_one_block_each(tmp_path: Path) -> None:
    await _fill(SqliteStore(str(tmp_path / "few.db")), {"few": 250})
    await _check_every_match_once(SqliteStore(str(tmp_path / "few.db")))
    steps: dict[int, int] = {}
    for matches in (300, 3_000):
        path = tmp_path / f"{matches}.db"
        await _fill(SqliteStore(str(path)), {"s": matches})
        db = sqlite3.connect(path)
        try:
            counted = [0]

            def step(counted: list[int] = counted) -> int:
                counted[0] += 1
                return 0

            db.set_progress_handler(step, 100)
            page = sqlite_reads.search(
                db, SearchQuery(text="needle", include_active=True), size=20, token=""
            )
            db.set_progress_handler(None, 0)
            assert len(page.items) == 20
            steps[matches] = counted[0]
        finally:
            db.close()
    # The same page of ten times as many matches costs about the same (ranked: 10x).
    assert steps[3_000] < 2 * steps[300], steps


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", ()):
        found += _nodes(child)
    return found


async def test_postgres_pages_rank_one_block_each(postgres: Postgres) -> None:
    async with scratch_database(postgres) as dsn:
        await _fill(PostgresStore(dsn, pool_size=2), {"few": 250, "large": 3_000})
        await _check_every_match_once(PostgresStore(dsn, pool_size=2))
        db = await asyncpg.connect(dsn)
        try:
            ran: list[tuple[str, tuple[Any, ...]]] = []
            db.add_query_logger(lambda logged: ran.append((logged.query, tuple(logged.args))))
            query = SearchQuery(text="needle", session_id="large", include_active=True)
            page = await postgres_reads.search(db, query, size=20, token="")
            assert len(page.items) == 20
            ranking = [(q, a) for q, a in ran if "ts_rank" in q and "ts_headline" not in q]
            assert len(ranking) == 1, ran
            sql, args = ranking[0]
            raw = await db.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
            nodes = _nodes(json.loads(raw)[0]["Plan"])
            sorts = [n for n in nodes if n["Node Type"] == "Sort" and "ts_rank" in str(n)]
            assert sorts, nodes
            # What is ranked is one block, not the 3,000 matches.
            ranked_rows = max(child["Actual Rows"] for s in sorts for child in s["Plans"])
            assert ranked_rows <= BLOCK, ranked_rows
        finally:
            await db.close()
