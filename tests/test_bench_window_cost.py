"""bench.window_cost's probe times the work it runs beside, however the two interleave."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bench import window_cost


class _InstantStub:
    """A GetContext that answers without yielding to the loop."""

    async def GetContext(self, request: Any, **options: Any) -> None:
        return None


async def test_work_that_ends_in_the_turn_the_probe_wakes_in_is_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The work ends in the loop's turn that wakes the probe, before it: the probe saw it
    done before the work's done callback ran (an IndexError in a tiny bench run)."""
    monkeypatch.setattr(window_cost, "PROBE_EVERY_S", 0)

    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    probe = window_cost.Probe(cast(Any, _InstantStub()))
    answer, seconds = await probe.meanwhile(work())
    assert answer == 7
    assert 0 <= seconds < 1
