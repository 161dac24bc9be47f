"""The Python client's README documents every call the client has."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from sidecar.client import AsyncClient, Client
from sidecar.client.aio import SessionHandle
from sidecar.client.sync import SyncSessionHandle

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"


@pytest.mark.parametrize("cls", [AsyncClient, SessionHandle, Client, SyncSessionHandle])
def test_every_public_call_is_in_the_readme(cls: type) -> None:
    text = README.read_text()
    calls = [name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")]
    missing = [name for name in calls if f"`{name}(" not in text]
    assert not missing, f"{cls.__name__}: {missing} not documented in {README.name}"
