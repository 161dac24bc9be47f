from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.server.app import Sidecar
from tests.compaction.fakes import FakeSummarizer
from tests.server.harness import address, running

# Compacts inline once a session holds more than 3 turns, keeping the last 4 events.
WINDOW: dict[str, Any] = {
    "trigger": {"turn_count": 3},
    "strategy": {"sliding_window": {"max_events": 4}},
}
# Summarizes in the background once a session holds more than 3 turns.
SUMMARIZE: dict[str, Any] = {
    "trigger": {"turn_count": 3},
    "strategy": {
        "summarize": {
            "max_events_to_keep": 4,
            "overlap": 1,
            "shadow_prompt": "Summary",
            "max_summary_tokens": 1,
        }
    },
}


def policy(data: dict[str, Any]) -> CompactionPolicy:
    return policy_from_dict(data)


def u(text: str = "hi", *, id: str = "") -> Event:
    return Event(id=id, role=Role.USER, text=text)


def a(text: str = "ok", *, id: str = "", calls: tuple[str, ...] = ()) -> Event:
    tool_calls = tuple(ToolCall(id=c, name="lookup", arguments_json="{}") for c in calls)
    return Event(id=id, role=Role.ASSISTANT, text=text, tool_calls=tool_calls)


def t(*results: str, id: str = "") -> Event:
    tool_results = tuple(ToolResult(call_id=r, name="lookup", content="done") for r in results)
    return Event(id=id, role=Role.TOOL, tool_results=tool_results)


def turn(n: int) -> list[Event]:
    """One question and its answer; the words make each turn findable by search."""
    return [u(f"question number{n}"), a(f"answer number{n}")]


async def until_watched(sidecar: Sidecar, session_id: str, watchers: int = 1) -> None:
    """Wait until the server has subscribed ``watchers`` watchers to the session.

    A watch is subscribed when its call reaches the server, which the client
    is not told; compaction results that land earlier are not replayed.
    """
    hub = sidecar.engine.watchers
    for _ in range(500):
        if len(hub._by_session.get(session_id, ())) >= watchers:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no watcher on {session_id!r}")


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[Sidecar]:
    # A summarizer, so that sessions may carry summarizing policies.
    summarizer = FakeSummarizer("recap")
    async with running(
        tmp_path, summarizer=summarizer, default_policy=json.dumps(WINDOW)
    ) as server:
        yield server


@pytest.fixture
async def client(sidecar: Sidecar) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(address(sidecar)) as connected:
        yield connected
