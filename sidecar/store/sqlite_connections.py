"""The SQLite store's connections, and each call one transaction on them.

One writer connection, a small pool of reader connections (WAL lets readers
run while the writer commits), connections of their own for searches, so
that no search, however long, keeps a context read waiting for a reader
(``sqlite_search``), and one for checkpoints (``sqlite_checkpoints``).
aiosqlite gives each connection its own thread; a whole transaction
(BEGIN ... COMMIT and every statement between) is queued to that thread as
ONE function, so:

- nothing blocks the event loop;
- transactions never interleave, however many coroutines call the store at
  once: the writer's thread runs them one after the other (``sqlite_writer``);
- a transaction costs one thread hop, not one per statement.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import TypeVar

import aiosqlite

from sidecar.errors import InvalidConfig, StoreUnavailable
from sidecar.store.sqlite_checkpoints import Checkpointer
from sidecar.store.sqlite_schema import (
    SYNCHRONOUS_MODES,
    configure_reader,
    configure_writer,
    migrate,
)
from sidecar.store.sqlite_search import SearchConnections
from sidecar.store.sqlite_threads import connect, run_in_connection_thread, store_error
from sidecar.store.sqlite_writer import SqliteWriter, in_transaction

T = TypeVar("T")

_NO_STORE_HERE = frozenset(
    {
        sqlite3.SQLITE_CANTOPEN,  # a directory, a path no file can be made at
        sqlite3.SQLITE_NOTADB,  # a file of something else (a certificate, a log)
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_READONLY,  # a file or directory this process may not write
    }
)
"""Result codes of opening a path that holds no store this process can use: no wait mends them."""


class SqliteConnections:
    """Every connection of one SqliteStore's file (see the module docstring)."""

    def __init__(
        self, path: str, *, synchronous: str, readers: int, search_connections: int
    ) -> None:
        if synchronous.upper() not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}, got {synchronous!r}")
        if readers < 1:
            raise ValueError(f"readers must be at least 1, got {readers}")
        self.path = path
        self.synchronous = synchronous.upper()
        self._reader_count = readers
        self.writer: SqliteWriter | None = None
        """The writer while open, else None."""
        self._readers: list[aiosqlite.Connection] = []
        self._idle: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._searches = SearchConnections(search_connections)
        self._checkpointer = Checkpointer()

    def require_writer(self) -> SqliteWriter:
        """The writer; StoreUnavailable when the store is not open."""
        writer = self.writer
        if writer is None:
            raise StoreUnavailable("sqlite store is not open")
        return writer

    async def open(self) -> None:
        """Connect, set the pragmas, run pending migrations (SchemaTooNew if the file is newer).

        A path that cannot hold this store (a directory, a file of something
        else, one this process may not write) is InvalidConfig naming
        ``store``: waiting would not mend it. Other SQLite errors are
        StoreUnavailable (a lock held past busy_timeout, a full disk).
        """
        try:
            await self._open()
        except sqlite3.Error as exc:  # from connecting, outside the connection's thread
            raise _refused(self.path, exc) or store_error(exc) from exc
        except StoreUnavailable as exc:
            if (refused := _refused(self.path, exc.__cause__)) is not None:
                raise refused from exc
            raise

    async def _open(self) -> None:
        # Any thread: light appends may commit on the loop's (``sqlite_writer``), never
        # while the writer's own thread holds the connection.
        writer = await connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            journal = await run_in_connection_thread(
                writer, lambda db: configure_writer(db, self.synchronous)
            )
            await run_in_connection_thread(writer, lambda db: migrate(db, self.path))
            for _ in range(self._reader_count):
                reader = await aiosqlite.connect(self.path, isolation_level=None)
                self._readers.append(reader)
                await run_in_connection_thread(reader, configure_reader)
                self._idle.put_nowait(reader)
            await self._searches.open(self.path)
            await self._checkpointer.open(self.path)
        except BaseException:
            await writer.close()
            await self._close_readers()
            await self._searches.close(wait=False)
            await self._checkpointer.close()
            raise
        # A commit that syncs to disk (FULL, EXTRA), or that waits for the readers (not in
        # WAL mode), stays off the event loop.
        self.writer = SqliteWriter(
            writer, inline=journal == "wal" and self.synchronous in ("OFF", "NORMAL")
        )

    async def close(self) -> None:
        """Let the writes in flight commit and the reads finish (stopping searches), disconnect."""
        writer = self.writer
        if writer is None:
            return
        await writer.idle()  # the writes running and queued still commit
        self.writer = None
        await self._searches.close()  # searches in flight are stopped: they are only reads
        # Taking every reader back from the pool waits for the reads in flight.
        for _ in self._readers:
            await self._idle.get()
        await self._close_readers()
        await self._checkpointer.close()
        # Queued after any write in flight, on the writer's own thread. Cheap, and
        # keeps the planner's statistics fresh for the next open.
        await run_in_connection_thread(writer.connection, lambda db: db.execute("PRAGMA optimize"))
        await writer.connection.close()

    async def _close_readers(self) -> None:
        readers, self._readers = self._readers, []
        self._idle = asyncio.Queue()
        for reader in readers:
            await reader.close()

    async def write(
        self,
        body: Callable[[sqlite3.Connection], T],
        *,
        session_id: str = "",
        weight: int = 1,
        inline: bool = False,
    ) -> T:
        """Run ``body`` in an IMMEDIATE transaction on the writer's thread (``sqlite_writer``);
        ``inline``: a light append's, which may commit at once when the writer is idle."""
        return await self.require_writer().write(
            body, session_id=session_id, weight=weight, inline=inline
        )

    async def write_many(
        self,
        writes: Sequence[tuple[Callable[[sqlite3.Connection], T], str, int]],
        *,
        inline: bool = False,
    ) -> list[T | Exception]:
        """Queue each ``(body, session_id, weight)`` at once; each one's outcome or error.
        ``inline``: light appends', which may commit at once when the writer is idle."""
        return await self.require_writer().write_many(writes, inline=inline)

    async def read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` as one read transaction (one snapshot) on an idle reader."""
        self.require_writer()
        reader = await self._idle.get()
        try:
            return await run_in_connection_thread(reader, in_transaction(body, begin="BEGIN"))
        finally:
            self._idle.put_nowait(reader)

    async def search(self, body: Callable[[sqlite3.Connection], T], timeout_s: float | None) -> T:
        """Run ``body`` as one read transaction on a search connection, stopped on time."""
        return await self._searches.run(body, timeout_s)


def _refused(path: str, exc: BaseException | None) -> InvalidConfig | None:
    """InvalidConfig naming ``store`` if ``exc`` says ``path`` cannot hold the store, else None."""
    if not isinstance(exc, sqlite3.Error) or exc.sqlite_errorcode & 0xFF not in _NO_STORE_HERE:
        return None
    reason = "it is a directory" if os.path.isdir(path) else str(exc)
    return InvalidConfig("store", f"cannot use {path!r} as a SQLite store: {reason}")
