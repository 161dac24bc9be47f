"""The reliability suite's shared fixture.

What it prints, the figures for docs/reliability.md (``budget.FIGURES``), is printed by
``tests/conftest.py``, which also gathers them from pytest-xdist's workers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from tests.conftest import Postgres, scratch_database
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Each store behind the server: a fresh SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sidecar.db'}"
        return
    postgres: Postgres = request.getfixturevalue("postgres")
    async with scratch_database(postgres) as dsn:
        yield dsn


@pytest.fixture
async def store_stub(tmp_path: Path, store_url: str) -> AsyncIterator[Stub]:
    """A stub of a server on its defaults over each store (``store_url``)."""
    async with running(tmp_path, store=store_url) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            yield pb_grpc.CompactionServiceStub(channel)
