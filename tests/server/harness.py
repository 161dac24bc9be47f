"""Start a real server on a free port for end-to-end tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from sidecar.server.app import Sidecar, start
from sidecar.server.config import ServerConfig
from sidecar.summarizer.protocol import Summarizer
from tests.postgres_server import free_port

__all__ = ["address", "free_port", "running", "until"]


@asynccontextmanager
async def running(
    tmp_path: Path,
    *,
    summarizer: Summarizer | None = None,
    **settings: object,
) -> AsyncIterator[Sidecar]:
    """A server on 127.0.0.1 and a free port, over a fresh SQLite file; stopped afterwards."""
    tmp_path.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - test setup, instant
    defaults: dict[str, object] = {
        "listen": "127.0.0.1:0",
        "store": f"sqlite:///{tmp_path / 'sidecar.db'}",
        "shutdown_grace_s": 1.0,
        "summarizer": "none",  # the tests that summarize pass theirs
    }
    config = replace(ServerConfig(), **{**defaults, **settings})  # type: ignore[arg-type]
    sidecar = await start(config, summarizer=summarizer)
    try:
        yield sidecar
    finally:
        await sidecar.stop(0.5)


def address(sidecar: Sidecar) -> str:
    return f"127.0.0.1:{sidecar.port}"


async def until(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Wait for a state of the server (requests waiting, a stream stalled, a budget drained).

    A state, not a length of time: on a loaded machine it comes late, never
    wrongly. ``timeout_s`` is only how long a test waits for one that never comes.
    """
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - the server's state, which signals nothing
            await asyncio.sleep(0.01)
