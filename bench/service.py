"""The real server, started in process over a fresh SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from sidecar.server.app import Sidecar, start
from sidecar.server.config import ServerConfig


@asynccontextmanager
async def sidecar_server(directory: Path, database: str = "bench.db") -> AsyncIterator[Sidecar]:
    """A server on 127.0.0.1 and a free port, with no default policy; stopped afterwards.

    Its SQLite file is ``directory/database``.
    """
    config = replace(
        ServerConfig(),
        listen="127.0.0.1:0",
        store=f"sqlite:///{directory / database}",
        default_policy="none",
        shutdown_grace_s=1.0,
        log_level="WARNING",
    )
    sidecar = await start(config)
    try:
        yield sidecar
    finally:
        await sidecar.stop(0.5)
