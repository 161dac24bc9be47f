"""The reliability suite's shared fixture, and what it prints: the figures for the README."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _pytest.terminal import TerminalReporter

from tests.conftest import Postgres, scratch_database
from tests.reliability.budget import FIGURES, LABELS, LONG, MEASURE_LABELS, MEASURES


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Each store behind the server: a fresh SQLite file, a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sidecar.db'}"
        return
    postgres: Postgres = request.getfixturevalue("postgres")
    async with scratch_database(postgres) as dsn:
        yield dsn


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
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
