"""How long ADK's ``get_session`` takes on a long session, before and after the adapter.

Before: ADK's own ``SqliteSessionService`` (every event, every call), and
``CompactionSessionService`` without a policy (the whole history as the
window). After: ``CompactionSessionService`` with an ADK-style policy (the
active window). The same events go into each: TURNS turns of a user
question, a tool call, a tool result and an answer. Run it in the ADK venv:

    .venv-adk/bin/python -m tests.adapters.measure_adk [TURNS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from google.adk.events.event import Event as AdkEvent
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from sidecar.adapters.adk import CompactionSessionService, adk_policy
from sidecar.client import AsyncClient
from tests.conformance.runner import serve

CALLS = 30


def turn_events(turn: int) -> list[AdkEvent]:
    city = f"City{turn}"
    call = types.FunctionCall(id=f"adk-{turn}", name="get_weather", args={"city": city})
    report = {"city": city, "report": f"{city}: sunny, 21 C, light wind. " * 8}
    response = types.FunctionResponse(id=f"adk-{turn}", name="get_weather", response=report)
    return [
        AdkEvent(
            author="user",
            invocation_id=f"i{turn}",
            content=types.Content(
                role="user", parts=[types.Part(text=f"Turn {turn}: the weather in {city}?")]
            ),
        ),
        AdkEvent(
            author="agent",
            invocation_id=f"i{turn}",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
        ),
        AdkEvent(
            author="agent",
            invocation_id=f"i{turn}",
            content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        ),
        AdkEvent(
            author="agent",
            invocation_id=f"i{turn}",
            content=types.Content(role="model", parts=[types.Part(text=f"It is sunny in {city}.")]),
        ),
    ]


async def measure(service: BaseSessionService, turns: int) -> tuple[float, int]:
    """Median get_session seconds over CALLS calls, and the events it returned."""
    session = await service.create_session(app_name="app", user_id="u", session_id="long")
    for turn in range(turns):
        for event in turn_events(turn):
            await service.append_event(session, event)
    times: list[float] = []
    count = 0
    for _ in range(CALLS):
        start = time.perf_counter()
        got = await service.get_session(app_name="app", user_id="u", session_id="long")
        times.append(time.perf_counter() - start)
        assert got is not None
        count = len(got.events)
    return statistics.median(times), count


async def main(address: str, db: Path, turns: int) -> None:
    async with AsyncClient(address) as client:
        rows = [
            ("ADK SqliteSessionService", SqliteSessionService(str(db))),
            (
                "CompactionSessionService, no policy",
                CompactionSessionService(client, namespace="full"),
            ),
            (
                "CompactionSessionService, adk_policy(compaction_interval=4, overlap_size=1)",
                CompactionSessionService(
                    client,
                    namespace="compacted",
                    policy=adk_policy(compaction_interval=4, overlap_size=1),
                    await_compaction=True,
                ),
            ),
        ]
        print(f"{turns} turns, {4 * turns} events; get_session median of {CALLS} calls")
        for name, service in rows:
            seconds, events = await measure(service, turns)
            print(f"| {name} | {seconds * 1000:.2f} ms | {events} events |")


if __name__ == "__main__":
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    binary = str(Path(sys.executable).with_name("compaction-sidecar"))
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(binary, ["--summarizer", "extractive", "--default-policy", "none"]) as server,
    ):
        asyncio.run(main(server.address, Path(tmp) / "adk.db", turns))
