"""The allocator is asked to keep few arenas, unless the environment already says; an idle
server hands memory back without spinning."""

from __future__ import annotations

import asyncio
import platform
import time
from types import SimpleNamespace
from typing import cast

import pytest

from sidecar.server import app
from sidecar.server.memory import limit_malloc_arenas


def test_arenas_are_limited_where_glibc_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() == (platform.libc_ver()[0] == "glibc")


def test_the_environment_decides_when_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not limit_malloc_arenas()


async def test_a_tiny_read_cache_idle_s_checks_for_quiet_without_spinning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check waited a quarter of the spell: 1e-9 s kept a core busy."""
    waits: list[float] = []

    class Enough(Exception):
        pass

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 3:
            raise Enough

    monkeypatch.setattr(asyncio, "sleep", sleep)
    sidecar = SimpleNamespace(
        config=SimpleNamespace(read_cache_idle_s=1e-9),
        servicer=SimpleNamespace(last_call=time.monotonic()),
    )
    with pytest.raises(Enough):
        await app.Sidecar.release_when_idle(cast(app.Sidecar, sidecar))
    assert waits == [app.IDLE_CHECK_MIN_S] * 3
