"""Fixtures shared by every test package: a real PostgreSQL server, started once.

``postgres`` starts a private cluster (see ``tests/postgres_server.py``) the
first time a test asks for it and stops it after the run; tests that never ask
cost nothing. With ``COMPACTION_TEST_POSTGRES_DSN`` set, that server is used
instead. ``postgres_database`` gives each test a database of its own.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg
import pytest

from tests.postgres_server import PostgresServer


@dataclass(frozen=True)
class Postgres:
    """A reachable server: ``dsn(database)`` names a database on it."""

    base_dsn: str
    server: PostgresServer | None

    def dsn(self, database: str) -> str:
        head, _, _ = self.base_dsn.rpartition("/")
        return f"{head}/{database}"


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    external = os.environ.get("COMPACTION_TEST_POSTGRES_DSN")
    if external:
        yield Postgres(external, None)
        return
    server = PostgresServer()
    try:
        server.init()
        server.start()
        yield Postgres(server.dsn(), server)
    finally:
        server.destroy()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A private server the test may stop and start without disturbing the others."""
    server = PostgresServer()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.destroy()


@asynccontextmanager
async def scratch_database(postgres: Postgres) -> AsyncIterator[str]:
    """Create an empty database, yield its URL, drop it (closing what still uses it)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(postgres.base_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield postgres.dsn(name)
    finally:
        admin = await asyncpg.connect(postgres.base_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture
async def postgres_database(postgres: Postgres) -> AsyncIterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    async with scratch_database(postgres) as dsn:
        yield dsn
