"""An event's author, branch and reasoning ids are bounded on their own: alike on both stores.

They were bounded only by the event's size (1 MiB), while the summarizer's input
carries each event's author whole and the renderings send a reasoning block's id
back to its provider. At its bound, counted in characters as the other names'
are, a value is stored and returned as given; past it the request is
INVALID_ARGUMENT naming the field, and nothing of it is stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from sidecar.engine.validation import MAX_AUTHOR_CHARS, MAX_BRANCH_CHARS, MAX_REASONING_ID_CHARS
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2
from tests.server.refusals import bad_fields, refused_fields

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

QUESTION = event_pb2.Event(id="u1", role=event_pb2.ROLE_USER, text="where is it?")


def _answer(extra: int = 0) -> event_pb2.Event:
    """An answer whose author, branch and reasoning id are ``extra`` characters past their bounds
    (non-ASCII: a bound is in characters, not bytes)."""
    return event_pb2.Event(
        id="a1",
        role=event_pb2.ROLE_ASSISTANT,
        text="found it",
        author="é" * (MAX_AUTHOR_CHARS + extra),
        branch=".".join(["root", "planner", "search"]).ljust(MAX_BRANCH_CHARS + extra, "x"),
        reasoning=[
            event_pb2.Reasoning(text="look first"),
            event_pb2.Reasoning(id="rs_".ljust(MAX_REASONING_ID_CHARS + extra, "é")),
        ],
    )


def _past(field: str) -> event_pb2.Event:
    """An answer at every bound but ``field``'s, one character past it."""
    event, over = _answer(), _answer(1)
    match field:
        case "author":
            event.author = over.author
        case "branch":
            event.branch = over.branch
        case "reasoning[1].id":
            event.reasoning[1].id = over.reasoning[1].id
    return event


async def _log(stub: Stub, session: str) -> list[event_pb2.Event]:
    return list((await stub.ListEvents(pb.ListEventsRequest(session_id=session))).events)


async def test_names_at_their_bounds_are_stored_as_given_on_both_stores(
    store_stub: Stub,
) -> None:
    sent = _answer()
    await store_stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[QUESTION, sent], create_if_missing=True)
    )
    context = await store_stub.GetContext(pb.GetContextRequest(session_id="s"))
    for answer in (context.events[1], (await _log(store_stub, "s"))[1]):
        assert (answer.author, answer.branch) == (sent.author, sent.branch)
        assert list(answer.reasoning) == list(sent.reasoning)


async def test_a_name_past_its_bound_is_invalid_argument_naming_it_on_both_stores(
    store_stub: Stub,
) -> None:
    stub = store_stub
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    for field in ("author", "branch", "reasoning[1].id"):
        refused = await refused_fields(
            stub.AppendEvents(
                pb.AppendEventsRequest(session_id="s", events=[QUESTION, _past(field)])
            )
        )
        assert refused == (grpc.StatusCode.INVALID_ARGUMENT, [f"events[1].{field}"])
    assert await _log(stub, "s") == []  # the batch is all or nothing
    # On a stream, appends fold together; the one past a bound fails alone.
    requests = [
        pb.StreamEventsRequest(request_id="r1", session_id="s", events=[QUESTION]),
        pb.StreamEventsRequest(request_id="r2", session_id="s", events=[_past("author")]),
    ]
    answers = [a async for a in stub.StreamEvents(iter(requests))]
    assert [(a.request_id, a.WhichOneof("result")) for a in answers] == [
        ("r1", "append"),
        ("r2", "error"),
    ]
    assert answers[1].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert bad_fields(answers[1].error) == ["events[0].author"]
    assert [e.id for e in await _log(stub, "s")] == ["u1"]
