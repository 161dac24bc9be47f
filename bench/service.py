"""The real server, started in process over a fresh SQLite file."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from sidecar.server.app import Sidecar, start
from sidecar.server.config import ServerConfig


@asynccontextmanager
async def sidecar_server(
    directory: Path, database: str = "bench.db", *, token_counting: str | None = None
) -> AsyncIterator[Sidecar]:
    """A server on 127.0.0.1 and a free port, with no default policy; stopped afterwards.

    Its SQLite file is ``directory/database``. ``token_counting`` sets its
    ``--token-counting``; unset, ``COMPACTION_TOKEN_COUNTING`` in the
    environment does, as it does the CLI's (to weigh ``on_append`` against the
    default, ``when_needed``).
    """
    if token_counting is None:
        token_counting = os.environ.get("COMPACTION_TOKEN_COUNTING", "when_needed")
    config = replace(
        ServerConfig(),
        listen="127.0.0.1:0",
        store=f"sqlite:///{directory / database}",
        default_policy="none",
        shutdown_grace_s=1.0,
        log_level="WARNING",
        token_counting=token_counting,
    )
    sidecar = await start(config)
    try:
        yield sidecar
    finally:
        await sidecar.stop(0.5)
