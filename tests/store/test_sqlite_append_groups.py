"""Plain appends written together (``sqlite_append_groups``) land exactly as one by one.

Property: on random groups of appends to a few sessions (stored or not,
created or refused, retries of stored events with the same or a changed
payload, an id repeated inside a batch, an event without an id, tool calls
and results, several appends to one session), the writer's group gives each
append the outcome it gets written alone, in a savepoint of its own, and
leaves the same rows: headers, events, tool links and events waiting for
search. Then the writer's part: a run of batchable bodies goes to
``together`` once, the bodies it leaves run alone after it in order, a
database error in it fails the whole group, and any other fault of it has
the group written again, each body alone.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.store import sqlite as sqlite_store
from sidecar.store import sqlite_schema, sqlite_writes
from sidecar.store.protocol import AppendOutcome, PlainAppend
from sidecar.store.sqlite import PlainAppendWrite, SqliteStore
from sidecar.store.sqlite_writer import in_group
from tests.store.test_contract import T0, u

SESSIONS = ("s0", "s1", "s2", "s3")
HOW = ("new",) * 12 + ("again", "changed", "no id", "unbindable")
"""How an event of a drawn append comes about: mostly new, so most appends take the
batched path and several of them meet in one session."""
NOW = T0 + timedelta(days=1)


def _open(directory: str, name: str) -> sqlite3.Connection:
    path = str(Path(directory) / name)
    db = sqlite3.connect(path, isolation_level=None)
    sqlite_schema.migrate(db, path)
    sqlite_schema.configure_writer(db, "NORMAL")
    return db


def _event(n: int, *, id: str | None = None, text: str = "", kind: int = 0) -> Event:
    """Event ``n``: a user message, an assistant's tool call or the tool's result."""
    id = f"e{n}" if id is None else id
    at = T0 + timedelta(seconds=n)
    if kind == 1:
        call = ToolCall(f"c{n}", "lookup", '{"q": 1}')
        return Event(id=id, role=Role.ASSISTANT, tool_calls=(call,), token_count=n, create_time=at)
    if kind == 2:
        result = ToolResult(f"c{n - 1}", "lookup", f"result {text}")
        return Event(id=id, role=Role.TOOL, tool_results=(result,), token_count=n, create_time=at)
    return Event(
        id=id,
        role=Role.USER,
        text=f"text {n} {text}",
        token_count=n,
        create_time=at,
        token_bounds=(n, n + 5) if n % 3 == 0 else None,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, list[Event]], list[PlainAppend]]:
    """Sessions already stored (with their events), and a group of appends."""
    numbers = itertools.count(1)
    stored = {
        session_id: [_event(next(numbers)) for _ in range(draw(st.integers(0, 2)))]
        for session_id in draw(st.sets(st.sampled_from(SESSIONS), min_size=2))
    }
    earlier: list[Event] = [e for events in stored.values() for e in events]
    appends: list[PlainAppend] = []
    for _ in range(draw(st.integers(1, 8))):
        events: list[Event] = []
        for _ in range(draw(st.integers(0, 3))):
            how = draw(st.sampled_from(HOW))
            if how in ("again", "changed") and earlier:
                prior = draw(st.sampled_from(earlier))
                events.append(prior if how == "again" else prior.evolve(text="changed"))
            elif how == "no id":
                events.append(_event(next(numbers), id=""))
            elif how == "unbindable":  # text sqlite3 cannot encode: fails only its own append
                events.append(_event(next(numbers), text="lone \ud800 surrogate"))
            else:
                event = _event(next(numbers), kind=draw(st.integers(0, 2)), text=draw(st.text()))
                events.append(event)
                earlier.append(event)
        appends.append(
            PlainAppend(draw(st.sampled_from(SESSIONS)), tuple(events), draw(st.booleans()))
        )
    return stored, appends


def _rows(db: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Everything the appends wrote, without the surrogate keys (the order of inserts may
    differ between the two paths, and with it the rowids)."""
    session_columns = [c for (_, c, *_) in db.execute("PRAGMA table_info(sessions)") if c != "pk"]
    event_columns = [
        f"e.{c}"
        for (_, c, *_) in db.execute("PRAGMA table_info(events)")
        if c not in ("pk", "session")
    ]
    return {
        "sessions": db.execute(
            f"SELECT {', '.join(session_columns)} FROM sessions ORDER BY id"
        ).fetchall(),
        "events": db.execute(
            f"SELECT s.id, {', '.join(event_columns)} FROM events e"
            " JOIN sessions s ON s.pk = e.session ORDER BY s.id, e.position"
        ).fetchall(),
        "tool_links": db.execute(
            "SELECT s.id, l.event, l.kind, l.call_key FROM tool_links l"
            " JOIN sessions s ON s.pk = l.session ORDER BY 1, 2, 3, 4"
        ).fetchall(),
        "fts_pending": db.execute(  # a row pointing at no event shows as (None, None)
            "SELECT s.id, e.id FROM fts_pending p LEFT JOIN events e ON e.pk = p.pk"
            " LEFT JOIN sessions s ON s.pk = e.session ORDER BY 1, 2"
        ).fetchall(),
        "not_pending": db.execute(
            "SELECT count(*) FROM events e WHERE e.pk NOT IN (SELECT pk FROM fts_pending)"
        ).fetchall(),
    }


def _described(outcome: tuple[bool, Any]) -> tuple[Any, ...]:
    ok, value = outcome
    if not ok:
        return (type(value).__name__, str(value))
    assert isinstance(value, AppendOutcome)
    return ("ok", value.events, value.session, value.written, value.usage_counted)


def _seeded(db: sqlite3.Connection, stored: dict[str, list[Event]]) -> None:
    for session_id, events in stored.items():
        db.execute("BEGIN IMMEDIATE")
        sqlite_writes.append(
            db,
            session_id,
            events,
            expected_version=None,
            create_if_missing=True,
            policy_json=None,
            now=T0,
        )
        db.execute("COMMIT")


def _group(db: sqlite3.Connection, bodies: Sequence[Any]) -> list[tuple[bool, Any]]:
    return in_group(bodies)(db)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_appends_written_together_land_as_written_one_by_one(
    scenario: tuple[dict[str, list[Event]], list[PlainAppend]],
) -> None:
    stored, appends = scenario
    policy = '{"strategy": "none"}'
    with (
        tempfile.TemporaryDirectory() as directory,
        mock.patch.object(sqlite_store, "utcnow", return_value=NOW),
    ):
        alone_db, together_db = _open(directory, "alone.db"), _open(directory, "together.db")
        _seeded(alone_db, stored)
        _seeded(together_db, stored)
        bodies = [PlainAppendWrite(append, policy) for append in appends]
        # The same bodies, each hidden behind a plain function: written one by one.
        alone = _group(alone_db, [lambda db, body=body: body(db) for body in bodies])
        together = _group(together_db, bodies)
        assert [_described(o) for o in together] == [_described(o) for o in alone]
        assert _rows(together_db) == _rows(alone_db)
        alone_db.close()
        together_db.close()


def test_a_group_of_new_events_to_stored_sessions_is_written_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path the property compares is the one taken: no append of such a group is
    written alone."""
    db = _open(str(tmp_path), "s.db")
    _seeded(db, {session_id: [] for session_id in SESSIONS})
    alone: list[str] = []
    real = sqlite_writes.append

    def recording(db: sqlite3.Connection, session_id: str, *args: Any, **kwargs: Any) -> Any:
        alone.append(session_id)
        return real(db, session_id, *args, **kwargs)

    monkeypatch.setattr(sqlite_writes, "append", recording)
    numbers = itertools.count(1)
    appends = [
        PlainAppend(session_id, (_event(next(numbers)), _event(next(numbers))), False)
        for session_id in SESSIONS * 2
    ]
    outcomes = _group(db, [PlainAppendWrite(append, None) for append in appends])
    assert alone == []
    assert all(ok for ok, _ in outcomes)
    versions = dict(db.execute("SELECT id, version FROM sessions"))
    assert versions == {session_id: 3 for session_id in SESSIONS}  # 1 seeded + 2 appends
    positions = db.execute(
        "SELECT s.id, group_concat(e.position) FROM events e JOIN sessions s"
        " ON s.pk = e.session GROUP BY s.id ORDER BY s.id"
    ).fetchall()
    assert positions == [(session_id, "1,2,3,4") for session_id in SESSIONS]


class Marks:
    """A batchable body kind for the writer's part: each writes its mark to a table."""

    def __init__(self, db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS marks (mark TEXT)")
        self.calls: list[list[str]] = []  # the marks handed to each ``together``
        self.leave: set[str] = set()  # marks ``together`` leaves to run alone
        self.fault: BaseException | None = None  # raised by ``together`` after it wrote

    def body(self, mark: str) -> Any:
        marks = self

        class Body:
            def __call__(self, db: sqlite3.Connection) -> str:
                if mark.startswith("bad"):
                    db.execute("INSERT INTO marks VALUES (?)", (mark,))
                    raise ValueError(mark)
                db.execute("INSERT INTO marks VALUES (?)", (f"{mark} alone",))
                return mark

            together = staticmethod(marks.together)

        body = Body()
        body.mark = mark  # type: ignore[attr-defined]
        return body

    def together(self, db: sqlite3.Connection, bodies: Sequence[Any]) -> list[Any]:
        marks = [body.mark for body in bodies]
        self.calls.append(marks)
        out: list[Any] = []
        for mark in marks:
            if mark in self.leave:
                out.append(None)
            elif mark.startswith("bad"):
                out.append((False, ValueError(mark)))
            else:
                db.execute("INSERT INTO marks VALUES (?)", (f"{mark} together",))
                out.append((True, mark))
        if self.fault is not None:
            raise self.fault
        return out


def _marks(db: sqlite3.Connection) -> list[str]:
    return [mark for (mark,) in db.execute("SELECT mark FROM marks ORDER BY rowid")]


def _plain(mark: str) -> Any:
    def body(db: sqlite3.Connection) -> str:
        db.execute("INSERT INTO marks VALUES (?)", (f"{mark} plain",))
        return mark

    return body


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(str(tmp_path / "w.db"), isolation_level=None)
    yield db
    db.close()


def test_a_run_of_batchable_bodies_is_handed_to_together_once(db: sqlite3.Connection) -> None:
    kind = Marks(db)
    bodies = [kind.body("a"), kind.body("b"), _plain("p"), kind.body("c"), kind.body("d")]
    outcomes = _group(db, bodies)
    assert kind.calls == [["a", "b"], ["c", "d"]]
    assert outcomes == [(True, "a"), (True, "b"), (True, "p"), (True, "c"), (True, "d")]
    assert _marks(db) == ["a together", "b together", "p plain", "c together", "d together"]


def test_a_lone_batchable_body_runs_alone(db: sqlite3.Connection) -> None:
    kind = Marks(db)
    assert _group(db, [_plain("p"), kind.body("a")]) == [(True, "p"), (True, "a")]
    assert kind.calls == []
    assert _marks(db) == ["p plain", "a alone"]


def test_bodies_left_by_together_run_alone_after_it_in_order(db: sqlite3.Connection) -> None:
    kind = Marks(db)
    kind.leave = {"b", "d"}
    outcomes = _group(db, [kind.body(m) for m in ("a", "b", "c", "d")])
    assert [value for _, value in outcomes] == ["a", "b", "c", "d"]
    assert _marks(db) == ["a together", "c together", "b alone", "d alone"]


def test_an_error_together_gives_fails_that_body_alone(db: sqlite3.Connection) -> None:
    kind = Marks(db)
    outcomes = _group(db, [kind.body("a"), kind.body("bad1"), kind.body("c")])
    assert [ok for ok, _ in outcomes] == [True, False, True]
    assert _marks(db) == ["a together", "c together"]


def test_a_database_error_in_together_fails_the_whole_group(db: sqlite3.Connection) -> None:
    kind = Marks(db)
    kind.fault = sqlite3.OperationalError("disk I/O error")
    with pytest.raises(sqlite3.OperationalError):
        _group(db, [_plain("p"), kind.body("a"), kind.body("b")])
    assert not db.in_transaction
    assert _marks(db) == []


def test_a_fault_of_together_writes_the_group_again_each_alone(db: sqlite3.Connection) -> None:
    """It runs in no savepoint (one would cost each append ~10 µs), so what it wrote
    before failing is undone with the whole transaction, and the group written again
    without it: each body gets the outcome it gets alone."""
    kind = Marks(db)
    kind.fault = KeyError("a bug in the batched path")
    outcomes = _group(db, [_plain("p"), kind.body("a"), kind.body("bad3"), kind.body("b")])
    assert [ok for ok, _ in outcomes] == [True, True, False, True]
    assert kind.calls == [["a", "bad3", "b"]]
    assert _marks(db) == ["p plain", "a alone", "b alone"]


@pytest.mark.parametrize("sessions", [3, 8], ids=["on the loop's thread", "on the writer's"])
async def test_an_append_the_batched_path_cannot_bind_fails_alone(
    tmp_path: Path, sessions: int
) -> None:
    """A token count past 64 bits passes the model but not sqlite3's binding: written
    together it failed every append of the group; now only its own (light groups commit
    on the loop's thread, heavier ones on the writer's: both fall back)."""
    store = SqliteStore(str(tmp_path / "s.db"))
    await store.open()
    try:
        names = [f"s{n}" for n in range(sessions)]
        for name in names:
            await store.append(name, [u(f"{name}-0")], create_if_missing=True)
        appends = [PlainAppend(name, (u(f"{name}-1"),)) for name in names]
        appends[1] = PlainAppend(names[1], (u(f"{names[1]}-1", tokens=2**63),))
        outcomes = await store.append_many(appends)
        kinds = [type(o).__name__ for o in outcomes]
        assert kinds == ["AppendOutcome", "OverflowError"] + ["AppendOutcome"] * (sessions - 2)
        for n, name in enumerate(names):
            _, window = await store.active_window(name)
            assert [e.id for e in window] == [f"{name}-0"] + ([] if n == 1 else [f"{name}-1"])
    finally:
        await store.close()


def test_new_events_wait_for_search_even_past_the_highest_rowid(tmp_path: Path) -> None:
    """At SQLite's highest rowid new rows get random ones, which the batched path cannot
    find for ``fts_pending``: it leaves such a group to be written one by one."""
    db = _open(str(tmp_path), "s.db")
    _seeded(db, {"s0": [_event(1)], "s1": [_event(2)], "top": [_event(3)]})
    db.execute("DELETE FROM fts_pending")  # as if indexed
    db.execute("UPDATE events SET pk = ? WHERE id = 'e3'", (2**63 - 1,))
    appends = [PlainAppend(name, (_event(10 + n),)) for n, name in enumerate(("s0", "s1"))]
    outcomes = _group(db, [PlainAppendWrite(append, None) for append in appends])
    assert all(ok for ok, _ in outcomes)
    (unqueued,) = db.execute(
        "SELECT count(*) FROM events WHERE pk NOT IN (SELECT pk FROM fts_pending)"
    ).fetchone()
    assert unqueued == 3  # those indexed before, not the two just written
