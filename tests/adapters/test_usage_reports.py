"""Both adapters' usage reports: never the reason an answer is lost or a model call fails."""

from __future__ import annotations

import logging

import pytest

from sidecar.adapters.usage import append_reporting, append_reporting_sync, model_usage
from sidecar.client import AsyncClient, Client, InvalidArgumentError, ModelUsage
from sidecar.model import Event, Role


def answer(n: int) -> Event:
    return Event(id=f"a{n}", role=Role.ASSISTANT, text=f"answer {n}")


def test_nothing_is_reported_without_a_version_or_a_count() -> None:
    assert model_usage(None, 120) is None
    assert model_usage(0, 120) is None
    assert model_usage(3, None) is None
    assert model_usage(3, 0) is None
    assert model_usage(3, 1 << 41) is None
    assert model_usage(3, 120) == ModelUsage(context_version=3, prompt_tokens=120)


async def test_a_report_the_server_refuses_is_dropped_the_answer_stored(
    sidecar_address: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with AsyncClient(sidecar_address) as client:
        await client.create_session("usage/refused", None, {})
        handle = client.session("usage/refused")
        with caplog.at_level(logging.DEBUG, logger="sidecar.adapters.usage"):
            await append_reporting(handle, [answer(1)], ModelUsage(0, 10))
            ignored = await append_reporting(handle, [answer(2)], ModelUsage(99, 10))
        assert ignored.usage_ignored_reason
        assert [e.id async for e in handle.events()] == ["a1", "a2"]
        assert (await handle.get()).calibration.samples == 0
        assert "refused" in caplog.text
        assert "not counted" in caplog.text
        # A refusal for anything but the report is the caller's to see.
        with pytest.raises(InvalidArgumentError):
            await append_reporting(handle, [answer(3).evolve(id="not an id")], ModelUsage(0, 10))


def test_the_blocking_client_drops_a_refused_report_too(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        client.create_session("usage/refused-sync", None, {})
        handle = client.session("usage/refused-sync")
        append_reporting_sync(handle, [answer(1)], ModelUsage(0, 10))
        assert [e.id for e in handle.events()] == ["a1"]
