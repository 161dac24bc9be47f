"""The SQLite store's one writing connection, and the writes waiting for it.

SQLite has one writer, so writes queue. They wait in a ``FairQueue``
(fairly between tenants, then between sessions, by weight) and are committed in groups, one
transaction per group with a savepoint per write, so a burst of small
appends costs one commit instead of one each. Neighbours in a group that can
be written together (``Batchable``: appends to many sessions) are handed
over in one call and need no savepoints.

The queue is drained on the writer's own thread: when a group commits, the
next one starts at once, and each write's caller is woken with its outcome;
the drain waits for more (up to ``LINGER_S``) before it stops.
Draining from the event loop instead would leave the writer idle for a
loop turn between groups — under load, longer than a group takes — and
every write would wait for those turns too.

One exception: a light write (an append of a few events, ``INLINE_MAX_WEIGHT``)
that finds the writer idle (nothing queued, no group committing) runs at
once on the caller's thread, the event loop's. Its caller would only wait
for it, and the two thread hand-offs (wake the writer, wake the loop) cost
more than the write: sequential unary appends against the CLI server went
from 884-1,072/s to 1,071-1,200/s and its CPU per append from 713-890 to
650-717 µs (four runs each, the two versions by turns, 2026-12-06; see
docs/performance.md). Nobody waits behind it (the queue is
empty), so fairness is untouched; under load the writer is busy and writes
queue as before (and an inline write, having taken no one's turn, does not
move its session's clock in the fair queue). A stream's batch of appends
to several sessions goes the same way when together it is that light, as
in a group (each in its savepoint, or written together: ``Batchable``). It
is refused, and the write queued, when a commit syncs to disk
(``synchronous`` FULL or EXTRA: the loop must not wait for fsync), when the
file is not in WAL mode (a commit would wait for the readers), or when
another process holds the file's write lock (the loop must not wait
``busy_timeout`` for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, cast

import aiosqlite

from sidecar.store.fair_queue import FairQueue
from sidecar.store.sqlite_schema import BUSY_TIMEOUT_MS
from sidecar.store.sqlite_threads import run_in_connection_thread, store_error

T = TypeVar("T")

LINGER_S = 1.0
"""How long the writer's thread waits for another write before it stops draining.

Starting to drain costs a task, a job on aiosqlite's queue and a loop
wake-up when it ends; an agent's sequential appends come a few
milliseconds apart, so a drain that stopped between them paid that on
every one. Waiting costs nothing (the thread sleeps on a condition), and
``idle()`` ends the wait at once.
"""

INLINE_MAX_WEIGHT = 4
"""The heaviest write (``fair_queue.write_weight``) that may run on the loop's thread."""

Body = Callable[[sqlite3.Connection], Any]


def in_transaction(
    body: Callable[[sqlite3.Connection], T], *, begin: str
) -> Callable[[sqlite3.Connection], T]:
    """Wrap ``body`` in BEGIN ... COMMIT, rolling back on any exception."""

    def run(db: sqlite3.Connection) -> T:
        db.execute(begin)
        return _then_commit(db, body)

    return run


def _then_commit(db: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    """``body`` in the transaction just begun, then COMMIT; ROLLBACK on any exception."""
    try:
        result = body(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


def in_group(
    bodies: Sequence[Body],
) -> Callable[[sqlite3.Connection], list[tuple[bool, Any]]]:
    """Run ``bodies`` in one transaction, each in a savepoint: ``(ok, result or error)`` each.

    A domain error (raised before or after the body wrote) rolls back that
    body alone. A database error (I/O, full disk, corruption) aborts the
    whole transaction: nothing of the group is committed and every write fails.
    """

    def run(db: sqlite3.Connection) -> list[tuple[bool, Any]]:
        db.execute("BEGIN IMMEDIATE")
        try:
            return _then_commit(db, functools.partial(_each_in_a_savepoint, bodies))
        except NotTogether:  # rolled back: the group again, each body alone
            db.execute("BEGIN IMMEDIATE")
            return _then_commit(db, functools.partial(_each_alone, bodies))

    return run


class Together(Protocol):
    """How bodies of one kind are written in one go (``Batchable.together``)."""

    def __call__(
        self, db: sqlite3.Connection, bodies: Sequence[Any]
    ) -> Sequence[tuple[bool, Any] | None]: ...


class Batchable(Protocol):
    """A body that may be written together with its neighbours of the same kind.

    ``together(db, bodies)`` writes those of ``bodies`` it can, at once, and
    gives for each ``(ok, result or error)``, or None: that body is run alone
    after it, in order. It must leave to run alone every body that has to
    follow one it left (a later write to the same session). It runs in no
    savepoint of its own, so it finds each body's own errors before it
    writes; should it raise anyway, the group is written again without it
    (``NotTogether``).
    """

    together: Together

    def __call__(self, db: sqlite3.Connection) -> Any: ...


class NotTogether(Exception):
    """``together`` failed other than as the database: the transaction is rolled back and
    its group written again, each body alone (``in_group``), so each gets the outcome it
    would alone. (An input the batched path cannot bind, such as text with a lone
    surrogate, fails its own write only.)"""


def _each_alone(bodies: Sequence[Body], db: sqlite3.Connection) -> list[tuple[bool, Any]]:
    """``bodies`` in the transaction begun, each in its savepoint, none written together."""
    return [_alone(body, db) for body in bodies]


def _each_in_a_savepoint(bodies: Sequence[Body], db: sqlite3.Connection) -> list[tuple[bool, Any]]:
    """``in_group``'s bodies in the transaction begun: ``(ok, result or error)`` each.

    A run of neighbours of one ``Batchable`` kind is written together;
    NotTogether when that fails other than as the database.
    """
    outcomes: list[tuple[bool, Any]] = []
    start = 0
    while start < len(bodies):
        together = getattr(bodies[start], "together", None)
        end = start + 1
        while together is not None and end < len(bodies):
            if getattr(bodies[end], "together", None) != together:
                break
            end += 1
        if end - start > 1:
            outcomes.extend(_together(cast(Together, together), bodies[start:end], db))
        else:
            outcomes.append(_alone(bodies[start], db))
        start = end
    return outcomes


def _alone(body: Body, db: sqlite3.Connection) -> tuple[bool, Any]:
    """``body`` in a savepoint of its own: rolled back alone on a domain error."""
    db.execute("SAVEPOINT write")
    try:
        outcome: tuple[bool, Any] = (True, body(db))
    except sqlite3.DatabaseError:
        raise
    except Exception as exc:
        db.execute("ROLLBACK TO write")
        outcome = (False, exc)
    db.execute("RELEASE write")
    return outcome


def _together(
    together: Together, bodies: Sequence[Body], db: sqlite3.Connection
) -> list[tuple[bool, Any]]:
    """``bodies`` written by ``together``, then those it left each alone, in order.

    No savepoint around ``together``: one makes SQLite copy every page the
    statements touch first into a journal of its own (about 10 µs an append
    in a group of 16). So what it wrote before failing cannot be undone
    alone: a database error fails the group, anything else (a fault of the
    batched path) raises NotTogether, for the whole group to be written again
    without it.
    """
    try:
        written = together(db, bodies)
    except sqlite3.DatabaseError:
        raise
    except Exception as exc:
        raise NotTogether(f"writing {len(bodies)} bodies together failed: {exc!r}") from exc
    return [
        _alone(body, db) if outcome is None else outcome
        for body, outcome in zip(bodies, written, strict=True)
    ]


def _begin_unless_locked(db: sqlite3.Connection) -> bool:
    """BEGIN IMMEDIATE without waiting: False, and no transaction, when another
    connection holds the write lock (any busy code, SQLITE_BUSY_SNAPSHOT included:
    the writer's thread would wait and retry)."""
    db.execute("PRAGMA busy_timeout = 0")
    try:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # extended codes
                raise
            return False
        finally:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except BaseException:
        if db.in_transaction:  # begun, then the wait could not be set back
            db.execute("ROLLBACK")
        raise
    return True


def _settle_all(settled: list[tuple[asyncio.Future[Any], tuple[bool, Any]]]) -> None:
    """Every write of a group, in order: one wake-up of the loop for the whole group."""
    for done, (ok, value) in settled:
        if done.cancelled():  # its caller gave up; the write itself went ahead
            continue
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)


class SqliteWriter:
    """Writes on one aiosqlite connection: queued fairly, committed in groups."""

    def __init__(
        self,
        connection: aiosqlite.Connection,
        queue: FairQueue | None = None,
        *,
        inline: bool = False,
    ) -> None:
        """``inline``: light writes may run on the loop's thread when the writer is idle
        (the connection must then allow any thread, and commits must not sync)."""
        self.connection = connection
        self._queue = queue if queue is not None else FairQueue()
        self._inline = inline
        # The queue and the flags below, shared with the thread; notified on each write.
        self._ready = threading.Condition()
        self._draining = False
        self._committing = False  # the thread has taken a group and not yet committed it
        self._releasing = False  # idle() asks the drain to stop once the queue is empty
        self._drains: set[asyncio.Task[None]] = set()
        # For the metrics: writes committed on the caller's thread, writes queued, and
        # the transactions the writer's thread committed them in.
        self.inline_writes = 0
        self.queued_writes = 0
        self.groups = 0

    async def write(
        self,
        body: Callable[[sqlite3.Connection], T],
        *,
        session_id: str = "",
        weight: int = 1,
        inline: bool = False,
    ) -> T:
        """Run ``body`` in a transaction of its group; its result, or its error.

        Each session's writes commit in the order they were made. A write
        goes ahead even if its caller is cancelled meanwhile: it is all or
        nothing either way. ``inline``: the body is cheap (an append's), so
        it may run at once on this thread if the writer is idle (see the
        module docstring).
        """
        if inline:
            outcomes = self._run_inline([body], weight)
            if outcomes is not None:
                ((ok, value),) = outcomes
                if ok:
                    return cast("T", value)
                raise value
        (done,) = self.submit_many([(body, session_id, weight)])
        return cast("T", await done)

    def _run_inline(self, bodies: list[Body], weight: int) -> list[tuple[bool, Any]] | None:
        """Commit ``bodies`` on this thread if the writer is idle, as the writer's thread
        would (one alone, several each in a savepoint): ``(ok, result or error)`` each;
        None when it is not idle, or another process holds the write lock."""
        if not self._inline or weight > INLINE_MAX_WEIGHT:
            return None
        with self._ready:
            if self._queue or self._committing:
                return None
            # Writes are queued from this thread only, so none is queued while this
            # runs; the flag keeps the drain off the connection all the same.
            self._committing = True
        try:
            db: sqlite3.Connection = self.connection._conn
            try:
                if not _begin_unless_locked(db):
                    return None
                if len(bodies) == 1:
                    outcomes = [(True, _then_commit(db, bodies[0]))]
                else:
                    outcomes = _then_commit(db, functools.partial(_each_in_a_savepoint, bodies))
                self.inline_writes += len(bodies)
                return outcomes
            except NotTogether:  # rolled back: the writer's thread writes them again
                return None
            except Exception as exc:  # the write's error, or the database's: each fails
                self.inline_writes += len(bodies)
                return [(False, store_error(exc))] * len(bodies)
        finally:
            # Nothing to notify: no write was queued meanwhile, and a lingering drain
            # waits for one.
            with self._ready:
                self._committing = False

    def submit_many(self, writes: Sequence[tuple[Body, str, int]]) -> list[asyncio.Future[Any]]:
        """Queue each ``(body, session_id, weight)`` as ``write`` does, now; their futures.

        Each is queued under its own session, so fairly as any write; taken
        in one turn of the queue's lock, they cost no task each and are
        settled in one wake-up when they commit together.
        """
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in writes]
        self.queued_writes += len(writes)
        with self._ready:
            for (body, session_id, weight), done in zip(writes, futures, strict=True):
                self._queue.put(session_id, weight, (body, done))
            start, self._draining = not self._draining, True
            self._ready.notify()
        if start:
            task = asyncio.create_task(run_in_connection_thread(self.connection, self._drain(loop)))
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
        return futures

    async def write_many(
        self,
        writes: Sequence[tuple[Callable[[sqlite3.Connection], T], str, int]],
        *,
        inline: bool = False,
    ) -> list[T | Exception]:
        """Queue each ``(body, session_id, weight)`` now (``submit_many``); each one's outcome.

        A write's error is its outcome, in its place, not raised. ``inline``:
        as ``write``'s, for all of them together (their weights summed).
        """
        if inline and writes:
            ran = self._run_inline([body for body, _, _ in writes], sum(w for _, _, w in writes))
            if ran is not None:
                return [value for _, value in ran]  # an error in its place, as queued
        queued = self.submit_many(writes)
        outcomes: list[T | Exception] = []
        try:
            for done in queued:
                try:
                    outcomes.append(await done)
                except Exception as exc:
                    outcomes.append(exc)
        finally:
            for done in queued:  # a cancelled caller: the writes go ahead, unheard
                if not done.done():
                    done.cancel()
                elif not done.cancelled():
                    done.exception()
        return outcomes

    async def idle(self) -> None:
        """Wait until every write made so far has committed or failed (the drain stops)."""
        while self._drains:
            with self._ready:
                self._releasing = True
                self._ready.notify()
            try:
                await asyncio.gather(*self._drains, return_exceptions=True)
            finally:
                with self._ready:
                    self._releasing = False

    def _drain(self, loop: asyncio.AbstractEventLoop) -> Callable[[sqlite3.Connection], None]:
        def drain(db: sqlite3.Connection) -> None:
            while True:
                with self._ready:
                    if not self._queue and not self._releasing:
                        self._ready.wait_for(lambda: self._queue or self._releasing, LINGER_S)
                    group = self._queue.take_group()
                    if not group:
                        self._draining = False
                        return
                    self._committing = True
                    self.groups += 1
                try:
                    outcomes = self._commit(db, [body for body, _ in group])
                finally:
                    with self._ready:
                        self._committing = False
                settled = [
                    (done, outcome) for (_, done), outcome in zip(group, outcomes, strict=True)
                ]
                with contextlib.suppress(RuntimeError):  # the loop closed: no one waits
                    loop.call_soon_threadsafe(_settle_all, settled)

        return drain

    @staticmethod
    def _commit(db: sqlite3.Connection, bodies: list[Body]) -> list[tuple[bool, Any]]:
        try:
            if len(bodies) == 1:
                return [(True, in_transaction(bodies[0], begin="BEGIN IMMEDIATE")(db))]
            return in_group(bodies)(db)
        except Exception as exc:  # the write, or the group's transaction as a whole, failed
            return [(False, store_error(exc))] * len(bodies)
