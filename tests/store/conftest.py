"""The ``store`` fixture: every Store implementation, so one contract suite holds them all.

To hold another implementation to the contract, add a factory to FACTORIES: an
async context manager that takes the test's request and yields an unopened
store, cleaning up after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from sidecar.store.postgres import PostgresStore
from sidecar.store.protocol import Store
from sidecar.store.sqlite import SqliteStore
from tests.conftest import Postgres, scratch_database

StoreFactory = Callable[[pytest.FixtureRequest], AbstractAsyncContextManager[Store]]


@asynccontextmanager
async def sqlite_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    tmp_path: Path = request.getfixturevalue("tmp_path")
    yield SqliteStore(str(tmp_path / "store.db"))


@asynccontextmanager
async def postgres_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A store in a fresh database on the session's PostgreSQL server."""
    postgres: Postgres = request.getfixturevalue("postgres")
    async with scratch_database(postgres) as dsn:
        yield PostgresStore(dsn, pool_size=4)


FACTORIES: dict[str, StoreFactory] = {
    "sqlite": sqlite_store,
    "postgres": postgres_store,
}


@pytest.fixture(params=sorted(FACTORIES))
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    async with FACTORIES[request.param](request) as unopened:
        await unopened.open()
        try:
            yield unopened
        finally:
            await unopened.close()
