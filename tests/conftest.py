"""Fixtures shared by every test package: a real PostgreSQL server, started once.

``postgres`` starts a private cluster (see ``tests/postgres_server.py``) the
first time a test asks for it and stops it after the run; tests that never ask
cost nothing. With ``COMPACTION_TEST_POSTGRES_DSN`` set, that server is used
instead. ``postgres_database`` gives each test a database of its own.

``make unit`` spreads the tests over two pytest-xdist workers. Each worker is a
process of its own, so each starts its own cluster (a temporary directory and a
free port of its own). The hooks below run the longest tests one after another
on one worker, start the next longest first, and bring the reliability suite's
figures back from the workers to the summary printed at the end.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from _pytest.terminal import TerminalReporter

from tests.postgres_server import PostgresServer
from tests.reliability.budget import FIGURES, LABELS, LONG, MEASURE_LABELS, MEASURES, measured

# The longest tests, longest first: the installs, the benchmarks' end-to-end
# runs, the image's command (most of a minute each on two cores), then the next
# longest. Under pytest-xdist (``make unit``: ``--dist loadgroup``) the first
# group runs on one worker, one after another, while the other worker takes the
# rest of the tests (each of these spends both cores on its own: pip, Maven,
# npm, a benchmark's server and clients); the next longest start first among
# the rest, so that no worker is left alone with a long test at the end.
# Without xdist the order is pytest's own.
LONGEST_TOGETHER = (
    "tests/docs/test_installs.py::test_the_python_distribution_installs_from_wheel_sdist_and_checkout_and_serves",
    "tests/docs/test_installs.py::test_the_java_client_installs_into_the_local_maven_repository_and_its_example_runs",
    "tests/test_bench_smoke.py::test_tiny_run_prints_every_target_and_writes_json",
    "tests/docs/test_installs.py::test_the_typescript_client_installs_from_npm_pack_and_its_example_runs",
    "tests/deploy/test_image_command.py::test_image_command_serves_from_a_fresh_wheel_install",
    "tests/test_bench_economics.py::test_quick_run_prints_every_target_and_writes_json_and_plot",
    "tests/store/test_crash.py::test_acknowledged_appends_survive_sigkill",
)
LONG_FIRST = (
    "tests/server/test_api.py::test_stream_whose_client_stops_reading_is_held_back",
    "tests/reliability/test_stream_memory.py::test_streams_of_big_requests_hold_bytes_not_messages",
    "tests/docs/test_installs.py::test_the_go_client_is_used_from_a_fresh_module_through_a_replace",
    "tests/engine/test_concurrency.py::test_lock_registry_returns_to_empty_after_a_burst_over_100k_sessions",
    "tests/docs/test_adapter_examples.py::test_the_adapter_snippets_run_in_the_agents_they_change",
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker
        return
    rank = {nodeid: i for i, nodeid in enumerate(LONGEST_TOGETHER + LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))  # stable: the rest as is
    for item in items:
        if item.nodeid in LONGEST_TOGETHER:
            item.add_marker(pytest.mark.xdist_group("longest"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker: hand its reliability figures to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["reliability"] = {"figures": dict(FIGURES), "measures": dict(MEASURES)}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: add up a finished worker's reliability figures."""
    output = getattr(node, "workeroutput", {}).get("reliability")
    if output:
        FIGURES.update(output["figures"])
        for key, value in output["measures"].items():
            measured(key, value)


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    """The reliability suite's figures for docs/reliability.md, when it ran."""
    if not FIGURES and not MEASURES:
        return
    mode = "long" if LONG else "quick"
    terminalreporter.section(f"reliability figures ({mode} mode)")
    for key, label in LABELS.items():
        if FIGURES.get(key):
            terminalreporter.write_line(f"{FIGURES[key]:>9,}  {label}")
    for key, label in MEASURE_LABELS.items():
        if key in MEASURES:
            terminalreporter.write_line(f"{MEASURES[key]:>9,.1f}  {label}")


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
