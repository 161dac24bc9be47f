from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.store.sqlite import SqliteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(str(tmp_path / "engine.db"))
    await store.open()
    try:
        yield store
    finally:
        await store.close()
