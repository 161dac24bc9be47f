"""A restore touches the rows the undone pass marked, not the window: its plans use their indexes.

A restore finds what to bring back by the marks a pass left (``archived_by``,
``cleared_by``, ``written_by``). Without an index on them, each of its
statements walks every event of the session, so undoing a pass that archived
two events cost seconds on a 200,000-event window. Each statement a restore
runs against ``events`` with a mark in it is captured as it runs and its plan
asked for: on SQLite (EXPLAIN QUERY PLAN) and PostgreSQL (EXPLAIN, after
ANALYZE), every one goes through a mark's index, none scans the session.
And no statement of a restore walks the window at all, not even through the
active window's index: its counters move by what its own rows changed
(a sum over the window cost 0.1 s of a restore on 200,000 events).
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg

from sidecar.model import CompactionPlan, Event, Role, utcnow
from sidecar.store import postgres_history, sqlite_history
from sidecar.store.postgres import PostgresStore
from sidecar.store.protocol import Store
from sidecar.store.sqlite import SqliteStore
from tests.conftest import Postgres, scratch_database

EVENTS = 20_000
MARK_INDEXES = {"events_archived_by", "events_cleared_by", "events_written_by"}
WINDOW_INDEXES = {"events_active", "events_log_order"}
_MARK = re.compile(r"\b(archived_by|cleared_by|written_by)\b")


def _event(i: int) -> Event:
    text = f"message {i}"
    return Event(
        id=f"e{i}", role=Role.USER if i % 2 == 0 else Role.ASSISTANT, text=text, token_count=3
    )


async def _compacted_session(store: Store) -> None:
    """A session of ``EVENTS`` events whose newest pass archived two and inserted a summary."""
    await store.open()
    try:
        for start in range(0, EVENTS, 2_000):
            batch = [_event(i) for i in range(start, start + 2_000)]
            await store.append("s", batch, create_if_missing=True)
        session = await store.get_session("s")
        summary = (
            Event(id="shadow", role=Role.USER, text="summarize", token_count=2),
            Event(id="summary", role=Role.ASSISTANT, text="they talked", token_count=3),
        )
        plan = CompactionPlan(
            strategy="summarize",
            archive_ids=("e0", "e1"),
            inserts=summary,
            insert_before="e2",
            base_compaction_id=session.last_compaction_id,
        )
        await store.apply("s", plan)
    finally:
        await store.close()


def _marked(statements: list[str]) -> list[str]:
    """The captured statements that look events up by a mark."""
    return [
        s
        for s in statements
        if re.search(r"\b(FROM|UPDATE) events\b", s)
        and " WHERE " in s
        and _MARK.search(s.split(" WHERE ", 1)[1])
    ]


async def test_a_restore_on_sqlite_looks_events_up_by_their_marks(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await _compacted_session(SqliteStore(str(path)))
    db = sqlite3.connect(path, isolation_level=None)
    try:
        ran: list[str] = []
        db.set_trace_callback(ran.append)
        db.execute("BEGIN IMMEDIATE")
        outcome = sqlite_history.restore(
            db, "s", "", expected_version=None, pause=False, now=utcnow()
        )
        db.execute("ROLLBACK")
        db.set_trace_callback(None)
        assert outcome.restored_ids == ("e0", "e1")
        assert [e.id for e in outcome.archived] == ["shadow", "summary"]
        marked = _marked(ran)
        assert len(marked) >= 4, ran  # what it brings back, its three updates, its answer
        for statement in marked:
            details = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}")]
            on_events = [d for d in details if re.search(r"\b(events|e)\b", d)]
            assert on_events, (statement, details)
            for detail in on_events:
                assert any(index in detail for index in MARK_INDEXES), (statement, details)
        for statement in ran:  # every statement of the restore, marks or not
            if re.search(r"\b(FROM|UPDATE) events\b", statement):
                details = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}")]
                walks = [d for d in details if any(i in d for i in WINDOW_INDEXES)]
                assert not walks, (statement, details)
                assert not [d for d in details if d.startswith("SCAN e")], (statement, details)
    finally:
        db.close()


def _plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", ()):
        found += _plan_nodes(child)
    return found


async def test_a_restore_on_postgres_looks_events_up_by_their_marks(postgres: Postgres) -> None:
    async with scratch_database(postgres) as dsn:
        await _compacted_session(PostgresStore(dsn, pool_size=2))
        db = await asyncpg.connect(dsn)
        try:
            await db.execute("ANALYZE events")
            ran: list[tuple[str, tuple[Any, ...]]] = []
            db.add_query_logger(lambda logged: ran.append((logged.query, tuple(logged.args))))
            tx = db.transaction()
            await tx.start()
            outcome = await postgres_history.restore(
                db, "s", "", expected_version=None, pause=False, now=utcnow()
            )
            await tx.rollback()
            captured = list(ran)  # what the restore ran; the EXPLAINs below are logged too
            assert outcome.restored_ids == ("e0", "e1")
            marked = [(q, a) for q, a in ran if q in _marked([q for q, _ in ran])]
            assert len(marked) >= 4, ran
            for query, args in marked:
                raw = await db.fetchval(f"EXPLAIN (FORMAT JSON) {query}", *args)
                nodes = _plan_nodes(json.loads(raw)[0]["Plan"])
                on_events = [n for n in nodes if n.get("Relation Name") == "events"]
                assert not [n for n in on_events if n["Node Type"] == "Seq Scan"], (query, nodes)
                used = {n["Index Name"] for n in nodes if "Index Name" in n}
                assert used, (query, nodes)
                assert used <= MARK_INDEXES, (query, used)
            for query, args in captured:  # every statement of the restore, marks or not
                if not re.search(r"\b(FROM|UPDATE) events\b", query):
                    continue
                raw = await db.fetchval(f"EXPLAIN (FORMAT JSON) {query}", *args)
                nodes = _plan_nodes(json.loads(raw)[0]["Plan"])
                on_events = [n for n in nodes if n.get("Relation Name") == "events"]
                assert not [n for n in on_events if n["Node Type"] == "Seq Scan"], (query, nodes)
                used = {n["Index Name"] for n in nodes if "Index Name" in n}
                assert not used & WINDOW_INDEXES, (query, used)
        finally:
            await db.close()
