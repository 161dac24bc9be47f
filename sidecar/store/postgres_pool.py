"""The PostgreSQL store's connections: one asyncpg pool, each call one transaction on it.

Writes run in READ COMMITTED, serialized per session by a row lock (see
``postgres_writes``); reads that need one snapshot (a session and its
window) in a REPEATABLE READ, READ ONLY one.

Failures. Anything that means "the database cannot answer now" — refused or
dropped connections, a shutdown or failover in progress, too many
connections, a full disk, a statement timeout, a serialization failure — is
StoreUnavailable (gRPC UNAVAILABLE), so clients retry and health turns
NOT_SERVING. The pool replaces broken connections as they are returned, so
service resumes by itself when the database is back: a connection lost takes
its idle siblings with it (a restart or failover ends them all), while an
error the server answers for one statement (a deadlock, a statement timeout,
a full disk) leaves every connection as it is. Reads and appends (which
are idempotent by event id) are retried once at once on such a failure: the
first call after a database restart usually meets a pooled connection the
server has closed, and should not fail for that.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit

import asyncpg

from sidecar.errors import InvalidConfig, StoreUnavailable
from sidecar.store.postgres_schema import Db, folds_accents, migrate

T = TypeVar("T")
log = logging.getLogger("sidecar.store.postgres")  # the store's own: operators filter on it

UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable, DNS
    TimeoutError,
    ssl.SSLError,
    asyncpg.PostgresConnectionError,  # dropped connection, rejected login
    asyncpg.InterfaceError,  # connection closed under us, pool closing
    asyncpg.exceptions.InternalClientError,  # protocol state left behind by a dropped link
    asyncpg.exceptions.OperatorInterventionError,  # shutdown, crash, statement timeout
    asyncpg.exceptions.InsufficientResourcesError,  # disk full, too many connections
    asyncpg.exceptions.TransactionRollbackError,  # serialization failure, deadlock
    asyncpg.exceptions.ReadOnlySQLTransactionError,  # connected to a standby after failover
)
"""What an outage raises: each is StoreUnavailable, never the call's own failure."""

STATEMENT_OUTAGES: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.QueryCanceledError,  # statement timeout, a cancel
    asyncpg.exceptions.InsufficientResourcesError,  # disk full, out of memory
    asyncpg.exceptions.TransactionRollbackError,
)
"""The outages the server answers for one statement: the connection that carried the
answer works, and so do its siblings."""


class PostgresPool:
    """The pool every call of a PostgresStore runs on (see the module docstring)."""

    def __init__(
        self,
        dsn: str,
        where: str,
        *,
        pool_size: int,
        connect_timeout_s: float,
        statement_timeout_s: float,
    ) -> None:
        self.dsn = dsn
        self.where = where
        """The database's URL without its password, for errors and logs."""
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self.pool: asyncpg.Pool | None = None
        """The asyncpg pool while open, else None."""
        self.folds_accents = False
        """Whether search folds accents (the unaccent extension was there); set by open."""

    async def open(self) -> None:
        """Connect, and run pending migrations (SchemaTooNew if the database is newer)."""
        if self.pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=min(2, self.pool_size),
                max_size=self.pool_size,
                timeout=self.connect_timeout_s,
                command_timeout=self.statement_timeout_s,
                # Statements differ per batch size; a server-side cache per shape is
                # cheap, and it is dropped with the connection.
                statement_cache_size=256,
            )
        except asyncpg.exceptions.ClientConfigurationError as exc:  # sslmode, sslrootcert
            raise InvalidConfig("store", f"postgres {self.where}: {_one_line(exc)}") from exc
        except UNAVAILABLE_ERRORS as exc:
            if _refused_ssl(exc):
                if _ssl_required(self.dsn):
                    raise InvalidConfig(
                        "store",
                        f"postgres {self.where}: the server does not offer SSL, which sslmode"
                        " asks for; enable SSL on the server or choose sslmode=prefer"
                        " (or the port is not PostgreSQL's)",
                    ) from exc
                raise StoreUnavailable(
                    f"postgres {self.where}: something answers there, but not as a"
                    " PostgreSQL server would (a wrong host or port?)"
                ) from exc
            raise StoreUnavailable(f"postgres {self.where}: {_one_line(exc)}") from exc
        except asyncpg.PostgresError as exc:  # bad credentials, no such database
            raise InvalidConfig("store", f"postgres {self.where}: {_one_line(exc)}") from exc
        try:
            async with pool.acquire() as db:
                await migrate(db, self.where)
                self.folds_accents = await folds_accents(db)
        except (
            asyncpg.InsufficientPrivilegeError,
            asyncpg.ReadOnlySQLTransactionError,
        ) as exc:  # no wait mends a role's rights, or a read-only standby
            await pool.close()
            raise InvalidConfig(
                "store",
                f"postgres {self.where}: the role cannot create or change the store's tables"
                f" ({_one_line(exc)}); GRANT CREATE ON SCHEMA to it, point ?search_path at"
                " a schema it owns, or connect to the primary",
            ) from exc
        except BaseException:
            await pool.close()
            raise
        if not self.folds_accents:
            log.warning(
                "postgres %s: the unaccent extension could not be installed, so search"
                ' does not fold accents ("cafe" will not find "café"); install'
                " PostgreSQL's contrib package, or have an owner run CREATE EXTENSION"
                " unaccent, then run ALTER TEXT SEARCH CONFIGURATION"
                " compaction_search ALTER MAPPING FOR hword, hword_part, word WITH"
                " unaccent, simple and rebuild the search column",
                self.where,
            )
        self.pool = pool

    async def close(self) -> None:
        """Wait for the calls in flight, then disconnect."""
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()

    async def run(self, body: Callable[[Db], Awaitable[T]], *, retry: bool) -> T:
        """Run ``body`` on a pooled connection; map outages to StoreUnavailable."""
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            pool = self.pool
            if pool is None:
                raise StoreUnavailable("postgres store is not open")
            try:
                async with pool.acquire(timeout=self.connect_timeout_s) as db:
                    try:
                        return await body(db)
                    except STATEMENT_OUTAGES:
                        raise  # the transaction is rolled back; the connection goes back
                    except UNAVAILABLE_ERRORS:
                        # A connection in doubt is never handed to the next caller, and
                        # its siblings likely died with it (a restart, a failover): the
                        # pool reconnects each before its next use.
                        db.terminate()
                        await pool.expire_connections()
                        raise
            except UNAVAILABLE_ERRORS as exc:
                if attempt < attempts:
                    log.info("postgres call failed (%s), retrying once", exc)
                    continue
                raise StoreUnavailable(f"postgres {self.where}: {exc}") from exc
        raise AssertionError("unreachable")

    async def write(self, body: Callable[[Db], Awaitable[T]], *, retry: bool = False) -> T:
        """Run ``body`` as one READ COMMITTED transaction."""

        async def in_transaction(db: Db) -> T:
            async with db.transaction():
                return await body(db)

        return await self.run(in_transaction, retry=retry)

    async def read(self, body: Callable[[Db], Awaitable[T]]) -> T:
        """Run ``body`` as one read-only snapshot (REPEATABLE READ)."""

        async def in_snapshot(db: Db) -> T:
            async with db.transaction(isolation="repeatable_read", readonly=True):
                return await body(db)

        return await self.run(in_snapshot, retry=True)


def _refused_ssl(exc: BaseException) -> bool:
    """Whether ``exc`` is asyncpg's answer to a server without SSL when sslmode requires it.

    The server answers the SSL request with "no" for as long as it runs
    without SSL, so no wait mends it. asyncpg 0.32 says so with a plain
    ConnectionError and only its message tells it from a refused connection.
    """
    return isinstance(exc, ConnectionError) and "rejected SSL upgrade" in str(exc)


_SSL_REQUIRED = frozenset({"require", "verify-ca", "verify-full"})


def _ssl_required(dsn: str) -> bool:
    """Whether ``dsn`` (its ``sslmode``, else ``PGSSLMODE``, else asyncpg's ``prefer``) needs SSL.

    Only then is "rejected SSL upgrade" a server without SSL: under ``prefer`` or
    ``allow`` asyncpg takes PostgreSQL's "no SSL" answer and goes on in the clear,
    and says it only of an answer no PostgreSQL server gives.
    """
    modes = [v for k, v in parse_qsl(urlsplit(dsn).query, keep_blank_values=True) if k == "sslmode"]
    mode = modes[-1] if modes else os.environ.get("PGSSLMODE", "prefer")
    return mode.strip().lower() in _SSL_REQUIRED


def _one_line(exc: BaseException) -> str:
    """``exc``'s message on one line: asyncpg puts its DETAIL and HINT on lines of their own."""
    return " ".join(str(exc).split())
