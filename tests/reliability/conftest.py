"""The reliability suite's shared fixture.

What it prints, the figures for docs/reliability.md (``budget.FIGURES``), is printed by
``tests/conftest.py``, which also gathers them from pytest-xdist's workers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import Postgres, scratch_database


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Each store behind the server: a fresh SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sidecar.db'}"
        return
    postgres: Postgres = request.getfixturevalue("postgres")
    async with scratch_database(postgres) as dsn:
        yield dsn
