"""The ``store`` fixture: every Store implementation, so one contract suite holds them all.

To hold another implementation to the contract, add a factory to FACTORIES: an
async context manager that yields an unopened store and cleans up after it
(PostgreSQL: create a scratch schema, yield, drop it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest

from sidecar.store.protocol import Store
from sidecar.store.sqlite import SqliteStore

StoreFactory = Callable[[Path], AbstractAsyncContextManager[Store]]


@asynccontextmanager
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    yield SqliteStore(str(tmp_path / "store.db"))


FACTORIES: dict[str, StoreFactory] = {
    "sqlite": sqlite_store,
}


@pytest.fixture(params=sorted(FACTORIES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with FACTORIES[request.param](tmp_path) as unopened:
        await unopened.open()
        try:
            yield unopened
        finally:
            await unopened.close()
