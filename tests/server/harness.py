"""Start a real server on a free port for end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from sidecar.server.app import Sidecar, start
from sidecar.server.config import ServerConfig
from sidecar.summarizer.protocol import Summarizer
from tests.postgres_server import free_port

__all__ = ["address", "free_port", "running"]


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
