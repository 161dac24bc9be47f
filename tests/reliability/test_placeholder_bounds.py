"""Clearing placeholders stay small whatever the names and ids a client sends.

A placeholder may repeat ``{name}`` and ``{call_id}``; every old result's
placeholder is built and counted while a pass runs. Tool names and call ids
are bounded at append (``max_tool_name_chars``, ``max_call_id_chars``), a
template at ``MAX_PLACEHOLDER_BYTES``, and each expansion is cut there: a
pass over many results at those bounds is quick, and another session's
GetContext is not held behind it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.compaction.clear_tool_results import MAX_PLACEHOLDER_BYTES
from sidecar.engine.validation import Limits
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.reliability.budget import FIGURES, LONG, measured
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

NAME_LIMIT = Limits().max_tool_name_chars
ID_LIMIT = Limits().max_call_id_chars
PAIRS, CALLS = (40, 25) if LONG else (10, 20)  # call/result events, calls in each
# A template at its bound, all of it ``{name}``: with names at theirs, each result's
# placeholder would be some 87 KB before the cut.
TEMPLATE = "{name}" * (MAX_PLACEHOLDER_BYTES // len("{name}"))
CONTENT = "row " * 3000  # 12 KB, 3,000 tokens a result: even a 2 KB placeholder shrinks it
COMPACT_BOUND_S = 10.0  # a loaded 2-core machine; before the bounds, minutes
CONTEXT_BOUND_S = 1.5  # another session's GetContext meanwhile; quiet, some ms


def _clear(placeholder: str) -> policy_pb2.CompactionPolicy:
    return policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(
            clear_tool_results=policy_pb2.ClearToolResults(
                keep_tool_uses=1, placeholder=placeholder
            )
        )
    )


def _tool_events(name: str, call_id: str) -> list[event_pb2.Event]:
    call = event_pb2.ToolCall(id=call_id, name=name, arguments_json="{}")
    result = event_pb2.ToolResult(call_id=call_id, name=name, content="ok")
    return [
        event_pb2.Event(id="a1", role=event_pb2.ROLE_ASSISTANT, tool_calls=[call]),
        event_pb2.Event(id="t1", role=event_pb2.ROLE_TOOL, tool_results=[result]),
    ]


async def _refusal(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


@pytest.fixture
async def stub(tmp_path: Path) -> object:
    async with running(tmp_path, default_policy="none") as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            yield pb_grpc.CompactionServiceStub(channel)


@pytest.mark.parametrize(
    ("name", "call_id", "field", "setting"),
    [
        ("n" * (NAME_LIMIT + 1), "c1", "events[0].tool_calls[0].name", "max_tool_name_chars"),
        ("grep", "c" * (ID_LIMIT + 1), "events[0].tool_calls[0].id", "max_call_id_chars"),
        ("n" * 30_000, "c1", "events[0].tool_calls[0].name", "max_tool_name_chars"),
    ],
)
async def test_a_name_or_call_id_past_its_bound_is_refused_naming_the_field(
    stub: Stub, name: str, call_id: str, field: str, setting: str
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    code, details = await _refusal(
        stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s", events=_tool_events(name, call_id))
        )
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in details
    assert setting in details
    listed = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    assert list(listed.events) == []  # nothing stored
    FIGURES["identifier_refusals"] += 1


@pytest.mark.parametrize(
    ("index", "field"),
    [(1, "events[1].tool_results[0].name"), (1, "events[1].tool_results[0].call_id")],
)
async def test_a_results_name_or_call_id_past_its_bound_is_refused(
    stub: Stub, index: int, field: str
) -> None:
    events = _tool_events("grep", "c1")
    long = "x" * (max(NAME_LIMIT, ID_LIMIT) + 1)
    if field.endswith(".name"):
        events[index].tool_results[0].name = long
    else:
        events[index].tool_results[0].call_id = long
    code, details = await _refusal(
        stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in details


async def test_a_template_past_its_bound_is_refused_naming_placeholder(stub: Stub) -> None:
    too_long = "x" * (MAX_PLACEHOLDER_BYTES + 1)
    code, details = await _refusal(
        stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=_clear(too_long)))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "clear_tool_results.placeholder" in details


def _loop_at_the_bounds() -> list[event_pb2.Event]:
    """A turn of ``PAIRS`` call/result events, ``CALLS`` calls each: names, ids at their bounds."""
    events = [event_pb2.Event(id="u1", role=event_pb2.ROLE_USER, text="look everywhere")]
    name = "n" * NAME_LIMIT
    for pair in range(PAIRS):
        ids = [f"{pair}-{i}-".ljust(ID_LIMIT, "c") for i in range(CALLS)]
        calls = [event_pb2.ToolCall(id=c, name=name, arguments_json="{}") for c in ids]
        results = [event_pb2.ToolResult(call_id=c, name=name, content=CONTENT) for c in ids]
        events.append(
            event_pb2.Event(id=f"a{pair}", role=event_pb2.ROLE_ASSISTANT, tool_calls=calls)
        )
        events.append(
            event_pb2.Event(id=f"t{pair}", role=event_pb2.ROLE_TOOL, tool_results=results)
        )
    return events


async def test_clearing_many_results_at_the_bounds_is_quick_and_holds_no_one_up(
    stub: Stub,
) -> None:
    """The issue's probe at the bounds: a quick Compact; another session's GetContext not held."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id="big", policy=_clear(TEMPLATE)))
    for event in _loop_at_the_bounds():  # one event an append: each well within the limits
        await stub.AppendEvents(pb.AppendEventsRequest(session_id="big", events=[event]))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="quiet"))
    await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="quiet", events=[event_pb2.Event(role=event_pb2.ROLE_USER, text="hi")]
        )
    )
    await stub.GetContext(pb.GetContextRequest(session_id="quiet"))
    slowest = 0.0
    done = asyncio.Event()

    async def reader() -> None:
        nonlocal slowest
        while not done.is_set():
            started = time.perf_counter()
            await stub.GetContext(pb.GetContextRequest(session_id="quiet"))
            slowest = max(slowest, time.perf_counter() - started)
            await asyncio.sleep(0.01)

    reading = asyncio.create_task(reader())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    answer = await stub.Compact(pb.CompactRequest(session_id="big", force=True), timeout=120)
    took = time.perf_counter() - started
    done.set()
    await reading
    measured("placeholder_compact_ms", took * 1000)
    measured("placeholder_context_max_ms", slowest * 1000)
    assert took < COMPACT_BOUND_S, f"Compact took {took:.1f} s"
    assert slowest < CONTEXT_BOUND_S, f"another session's GetContext waited {slowest:.2f} s"
    # Cut at the bound, the placeholders are smaller than what they replace: all cleared.
    assert answer.result.compacted
    assert (
        len(answer.result.cleared_event_ids) == PAIRS
    )  # every tool event, the newest kept in part
    context = await stub.GetContext(pb.GetContextRequest(session_id="big"))
    shown = [r.content for e in context.events for r in e.tool_results if r.content != CONTENT]
    assert len(shown) == PAIRS * CALLS - 1
    assert all(len(text.encode()) <= MAX_PLACEHOLDER_BYTES for text in shown)
    FIGURES["placeholder_results_cleared"] += len(shown)
