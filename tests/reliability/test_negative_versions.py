"""A negative ``expected_version`` is a malformed request, not a stale one: alike on both stores.

No session is ever at a negative version, so the stores answered one
FAILED_PRECONDITION, which tells a client to read the version again and retry
(AIP-154) — a retry that could never succeed. It is INVALID_ARGUMENT naming the
field (AIP-193) on every request that takes one, refused before any store sees
it, and 0 still means no check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc
from google.protobuf.field_mask_pb2 import FieldMask

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, session_pb2
from tests.server.refusals import bad_fields, refused_fields

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

REFUSED = (grpc.StatusCode.INVALID_ARGUMENT, ["expected_version"])


def _turn(n: int) -> list[event_pb2.Event]:
    return [
        event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"question {n}"),
        event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text=f"answer {n}"),
    ]


async def _state(stub: Stub) -> tuple[int, dict[str, str], list[str], list[str]]:
    """Session ``s``'s version, labels and log, and the sessions there are."""
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    log = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    sessions = await stub.ListSessions(pb.ListSessionsRequest())
    return (
        session.version,
        dict(session.labels),
        [e.id for e in log.events],
        sorted(s.session_id for s in sessions.sessions),
    )


async def test_a_negative_expected_version_is_invalid_argument_naming_it_on_both_stores(
    store_stub: Stub,
) -> None:
    stub = store_stub
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=_turn(0), create_if_missing=True)
    )
    before = await _state(stub)
    labels = session_pb2.Session(session_id="s", labels={"k": "v"})
    elsewhere = pb.LabelUpdate(session_id="t", set={"k": "v"}, expected_version=-3)
    assert (
        await refused_fields(
            stub.UpdateSession(
                pb.UpdateSessionRequest(
                    session=labels, update_mask=FieldMask(paths=["labels"]), expected_version=-1
                )
            )
        )
        == REFUSED
    )
    assert (
        await refused_fields(
            stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s", events=_turn(1), expected_version=-1)
            )
        )
        == REFUSED
    )
    assert await refused_fields(
        stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s", events=_turn(1), label_updates=[elsewhere])
        )
    ) == (grpc.StatusCode.INVALID_ARGUMENT, ["label_updates[0].expected_version"])
    assert (
        await refused_fields(
            stub.Compact(pb.CompactRequest(session_id="s", force=True, expected_version=-1))
        )
        == REFUSED
    )
    assert (
        await refused_fields(
            stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s", expected_version=-1))
        )
        == REFUSED
    )
    streamed = pb.StreamEventsRequest(
        request_id="r1", session_id="s", events=_turn(1), expected_version=-1
    )
    answers = [answer async for answer in stub.StreamEvents(iter([streamed]))]
    assert [(a.request_id, a.error.code, bad_fields(a.error)) for a in answers] == [
        ("r1", grpc.StatusCode.INVALID_ARGUMENT.value[0], ["expected_version"])
    ]
    assert await _state(stub) == before  # nothing stored, no session "t" created
    # 0 is still no check.
    appended = await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=_turn(1), expected_version=0)
    )
    assert appended.version == before[0] + 1
