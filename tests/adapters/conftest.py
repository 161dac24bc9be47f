"""A real ``compaction-sidecar serve`` for the adapter tests.

The ``test`` extra pins google-adk and langchain, so both suites always run:
without a framework, collection fails rather than skipping.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.runner import serve


@pytest.fixture(scope="module")
def sidecar_address() -> Iterator[str]:
    """A server process on a free port over SQLite in a temp dir, with the offline summarizer.

    The binary is the one installed next to this interpreter, so the server
    under test is this checkout's.
    """
    binary = str(Path(sys.executable).with_name("compaction-sidecar"))
    with serve(binary, ["--summarizer", "extractive", "--default-policy", "none"]) as server:
        yield server.address
