"""Token totals past what a 32-bit integer holds read as its largest value: alike on both stores.

The API's token fields are int32, and so are PostgreSQL's columns for a
compaction's tokens saved and a window's stable prefix. A window of more than
2**31 - 1 tokens made every GetSession, GetContext and Compact of its session
INTERNAL ("Value out of range"), and a compaction of such a window could not be
recorded on PostgreSQL. Stand-ins (``sidecar.stand_in``: an event stored cut
whose framework sends it whole) make such a window a few kilobytes of requests.
Now each total saturates at ``INT32_MAX`` where it leaves the server or enters
an integer column, past every threshold a policy can set; the decisions use
the totals themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sidecar.compaction.tokens import MAX_STAND_IN_BYTES, STAND_IN_KEY
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.model import INT32_MAX

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

RESULTS = 200  # x 64 MiB / 4 bytes a token: 3.4 billion tokens


def _window() -> list[event_pb2.Event]:
    events = [event_pb2.Event(id="u", role=event_pb2.ROLE_USER, text="Fetch every log.")]
    for i in range(RESULTS):
        call = event_pb2.ToolCall(id=f"c{i}", name="fetch_log", arguments_json="{}")
        result = event_pb2.ToolResult(call_id=f"c{i}", name="fetch_log", content="ERROR")
        events += [
            event_pb2.Event(id=f"a{i}", role=event_pb2.ROLE_ASSISTANT, tool_calls=[call]),
            event_pb2.Event(
                id=f"t{i}",
                role=event_pb2.ROLE_TOOL,
                tool_results=[result],
                metadata={STAND_IN_KEY: str(MAX_STAND_IN_BYTES)},
            ),
        ]
    return [*events, event_pb2.Event(id="z", role=event_pb2.ROLE_ASSISTANT, text="Done.")]


async def test_totals_past_int32_saturate_and_the_session_keeps_working_on_both_stores(
    store_stub: Stub,
) -> None:
    clear_all = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(
            clear_tool_results=policy_pb2.ClearToolResults(keep_tool_uses=0)
        )
    )
    await store_stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    await store_stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=_window()))
    assert (await store_stub.GetSession(pb.GetSessionRequest(session_id="s"))).active_tokens == (
        INT32_MAX
    )
    context = await store_stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert context.token_count == INT32_MAX
    compacted = await store_stub.Compact(
        pb.CompactRequest(session_id="s", policy=clear_all, force=True)
    )
    assert compacted.result.compacted
    assert compacted.result.tokens_estimated_saved == INT32_MAX
    assert len(compacted.result.cleared_event_ids) == RESULTS
    session = await store_stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert 0 < session.active_tokens < 10_000  # the placeholders, counted as such
    (record,) = (
        await store_stub.ListCompactions(pb.ListCompactionsRequest(session_id="s"))
    ).compactions
    assert record.tokens_saved == INT32_MAX
    restored = await store_stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s"))
    assert restored.result.compacted
    back = await store_stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert back.active_tokens == INT32_MAX
