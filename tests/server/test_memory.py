"""The allocator is asked to keep few arenas, unless the environment already says."""

from __future__ import annotations

import platform

import pytest

from sidecar.server.memory import limit_malloc_arenas


def test_arenas_are_limited_where_glibc_allows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas() == (platform.libc_ver()[0] == "glibc")


def test_the_environment_decides_when_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert not limit_malloc_arenas()
