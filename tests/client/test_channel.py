"""Reaching the server: over TLS, with and without a client certificate; answers of any size
the server sends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sidecar.client import AsyncClient, Client, Tls, UnavailableError
from sidecar.model import Event, Role
from tests.client.conftest import turn
from tests.server.harness import address, running
from tests.tls import self_signed


async def test_tls_with_the_server_certificate_as_root(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    async with running(tmp_path, tls_cert=str(cert), tls_key=str(key)) as sidecar:
        trusted = Tls(root_certificates=cert.read_bytes())
        async with AsyncClient(address(sidecar), tls=trusted) as client:
            result = await client.session("s1").append(turn(0), create_if_missing=True)
        async with AsyncClient(address(sidecar), retries=0) as plaintext:
            with pytest.raises(UnavailableError):
                await plaintext.get_session("s1")

    assert result.version > 0


async def test_mutual_tls_presents_the_client_certificate(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    async with running(
        tmp_path, tls_cert=str(cert), tls_key=str(key), tls_client_ca=str(cert)
    ) as sidecar:
        mutual = Tls(
            root_certificates=cert.read_bytes(),
            private_key=key.read_bytes(),
            certificate_chain=cert.read_bytes(),
        )
        async with AsyncClient(address(sidecar), tls=mutual) as client:
            session = await client.create_session("s1")
        server_only = Tls(root_certificates=cert.read_bytes())
        async with AsyncClient(address(sidecar), tls=server_only, retries=0) as stranger:
            with pytest.raises(UnavailableError):
                await stranger.get_session("s1")

    assert session.session_id == "s1"


def test_tls_key_and_chain_go_together() -> None:
    with pytest.raises(ValueError, match="go together"):
        Tls(private_key=b"key")


async def test_a_window_past_grpcs_default_4_mib_is_read_in_one_answer(tmp_path: Path) -> None:
    """The server answers up to its --max-message-bytes (16 MiB by default); the client
    kept gRPC's 4 MiB receive limit, so a window between the two could never be read
    again (an ADK get_session, a LangChain before_model: every time)."""
    async with running(tmp_path, default_policy="none") as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            session = client.session("big")
            for i in range(5):
                await session.append(
                    [Event(id=f"e{i}", role=Role.USER, text=f"{i}" + "x" * 900_000)],
                    create_if_missing=True,
                )
            context = await session.context()
            assert [e.id for e in context.events] == [f"e{i}" for i in range(5)]

        def read_blocking() -> int:
            with Client(address(sidecar)) as blocking:
                return len(blocking.session("big").context().events)

        # The blocking client on a thread of its own: the server runs on this loop.
        assert await asyncio.to_thread(read_blocking) == 5
