"""Fuzz every RPC, and the socket under it, against one real ``serve`` process.

For each hypothesis example one request (a short stream for StreamEvents) goes
to the server as raw bytes through a generic call with identity serializers,
so that corrupted encodings reach the wire too. Whatever comes in:

- the answer is never INTERNAL or UNKNOWN (nor UNAVAILABLE: the store is fine),
  per request on a stream as well;
- the server process stays up;
- a rejected request changes nothing stored: the seeded sessions (header and
  whole log, via GetSession and ListEvents) are byte-for-byte what they were.

The bugs it found are fixed; ``test_regressions.py`` keeps a minimal repro of
each. Any INTERNAL/UNKNOWN fails the test.

Then raw garbage on the TCP socket: random bytes, a truncated HTTP/2 preface,
a valid preface followed by garbage frames. The server must keep serving.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2
from sidecar.store import paging
from sidecar.store.paging import encode_token, fingerprint
from tests.reliability import wire
from tests.reliability.budget import BUDGET, FIGURES, LONG
from tests.reliability.fuzz_requests import (
    METHODS,
    POOLS,
    SEEDS,
    SERVICE,
    corrupt,
    request,
)
from tests.reliability.serve import ServeProcess
from tests.server.harness import free_port

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE}
PATH = "/compaction.v1.CompactionService/"
PAGE_TOKEN_KEY = "the-fuzzed-servers-page-token-key"


@dataclass
class Outcome:
    """How one fuzzed call ended: its status, and the per-request statuses of a stream."""

    code: grpc.StatusCode
    details: str
    stream_codes: list[int] = field(default_factory=list)
    stored_something: bool = False


class FuzzTarget:
    """The server under fuzz, its seeded sessions, and a raw channel to it."""

    def __init__(self, server: ServeProcess) -> None:
        self.server = server
        self.channel = grpc.insecure_channel(server.address)
        self.stub = pb_grpc.CompactionServiceStub(self.channel)
        self.snapshot: dict[str, bytes] = {}

    def close(self) -> None:
        self.channel.close()

    # -- seeded sessions ------------------------------------------------------

    def seed(self) -> None:
        """Create missing seeds: a tool turn, plain turns, a compaction; learn page tokens."""
        for index, session in enumerate(SEEDS):
            try:
                self.stub.GetSession(pb.GetSessionRequest(session_id=session), timeout=10)
                continue
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:
                    raise
            policy = policy_pb2.CompactionPolicy(
                trigger=policy_pb2.Trigger(event_count=30),
                strategy=policy_pb2.Strategy(
                    sliding_window=policy_pb2.SlidingWindow(max_events=4 + index)
                ),
            )
            self.stub.CreateSession(
                pb.CreateSessionRequest(session_id=session, policy=policy, labels={"seed": "1"}),
                timeout=10,
            )
            events = []
            for n in range(4):
                call = event_pb2.ToolCall(id=f"c{n}", name="lookup", arguments_json="{}")
                events += [
                    event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"question {n}"),
                    event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, tool_calls=[call]),
                    event_pb2.Event(
                        id=f"t{n}",
                        role=event_pb2.ROLE_TOOL,
                        tool_results=[event_pb2.ToolResult(call_id=f"c{n}", content="42")],
                    ),
                ]
            self.stub.AppendEvents(
                pb.AppendEventsRequest(session_id=session, events=events), timeout=10
            )
            self.stub.Compact(pb.CompactRequest(session_id=session, force=True), timeout=10)
        tokens = [
            self.stub.ListEvents(
                pb.ListEventsRequest(session_id=SEEDS[0], page_size=2), timeout=10
            ).next_page_token,
            self.stub.ListSessions(pb.ListSessionsRequest(page_size=1), timeout=10).next_page_token,
            self.stub.SearchEvents(
                pb.SearchEventsRequest(query="question", include_active=True, page_size=1),
                timeout=10,
            ).next_page_token,
        ]
        # Real tokens, and forged ones bound to a seed's listing, signed with the server's
        # key (past the signature check, as if the key had leaked) to reach the range checks.
        paging.use_key(PAGE_TOKEN_KEY)
        try:
            forged = encode_token("events", fingerprint(SEEDS[0], True), (10**30, 1))
        finally:
            paging.use_key("")
        POOLS.page_tokens = [*(t for t in tokens if t), forged]

    def take_snapshot(self) -> dict[str, bytes]:
        """Each seed's header and whole log, serialized deterministically."""
        out: dict[str, bytes] = {}
        for session in SEEDS:
            header = self.stub.GetSession(pb.GetSessionRequest(session_id=session), timeout=10)
            blob = header.SerializeToString(deterministic=True)
            token = ""
            while True:
                page = self.stub.ListEvents(
                    pb.ListEventsRequest(session_id=session, page_size=1000, page_token=token),
                    timeout=10,
                )
                blob += page.SerializeToString(deterministic=True)
                token = page.next_page_token
                if not token:
                    break
            out[session] = blob
        return out

    def resync(self) -> None:
        """After an accepted request: re-seed what it deleted, take a fresh snapshot."""
        self.seed()
        self.snapshot = self.take_snapshot()

    # -- calls ----------------------------------------------------------------

    def call(self, method: str, raws: list[bytes]) -> Outcome:
        spec = SERVICE.methods_by_name[method]
        path = PATH + method
        try:
            if spec.client_streaming:
                responses = self.channel.stream_stream(path, None, None)(iter(raws), timeout=30)
                outcome = Outcome(grpc.StatusCode.OK, "")
                for raw in responses:
                    answer = pb.StreamEventsResponse.FromString(raw)
                    if answer.HasField("error"):
                        outcome.stream_codes.append(answer.error.code)
                    if answer.HasField("append"):
                        outcome.stored_something = True
                return outcome
            if spec.server_streaming:
                for _ in self.channel.unary_stream(path, None, None)(raws[0], timeout=0.3):
                    pass
                return Outcome(grpc.StatusCode.OK, "")
            self.channel.unary_unary(path, None, None)(raws[0], timeout=30)
            return Outcome(grpc.StatusCode.OK, "", stored_something=True)
        except grpc.RpcError as error:
            return Outcome(error.code(), error.details() or "")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    server = ServeProcess(
        tmp / "fuzz.db", free_port(), tmp / "serve.log", ("--page-token-key", PAGE_TOKEN_KEY)
    )
    server.start()
    fuzz = FuzzTarget(server)
    try:
        fuzz.resync()
        yield fuzz
    finally:
        fuzz.close()
        server.stop()


def _judge(target: FuzzTarget, method: str, raws: list[bytes], outcome: Outcome) -> None:
    """The three rules of the module docstring, for one call."""
    where = f"{method} {[r[:200] for r in raws]!r}"
    assert target.server.alive(), f"the server died on {where}: {target.server.tail()}"
    assert outcome.code not in FORBIDDEN, f"{outcome.code} ({outcome.details}) for {where}"
    for code in outcome.stream_codes:
        assert code not in (2, 13, 14), f"per-request status {code} on the stream for {where}"
    if method == "WatchSession":
        assert outcome.code != grpc.StatusCode.OK  # a watch ends only by its deadline or an error
    elif method != "StreamEvents":
        assert outcome.code != grpc.StatusCode.DEADLINE_EXCEEDED, where
    if outcome.stored_something or outcome.code == grpc.StatusCode.OK:
        target.resync()  # accepted: may have changed the seeds
        return
    after = target.take_snapshot()
    for session in SEEDS:
        assert after[session] == target.snapshot[session], (
            f"rejected {outcome.code} changed {session}: {where}"
        )


@pytest.mark.parametrize("method", METHODS)
@settings(
    max_examples=BUDGET.fuzz_examples,
    deadline=None,
    derandomize=not LONG,  # the quick run is the same every time; the long one explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_fuzzed_requests_never_fail_internally_nor_change_data_when_rejected(
    target: FuzzTarget, method: str, data: st.DataObject
) -> None:
    count = data.draw(st.integers(1, 4)) if method == "StreamEvents" else 1
    raws: list[bytes] = []
    for _ in range(count):
        message: Message = data.draw(request(method))
        _, raw = data.draw(corrupt(method, message.SerializeToString()))
        raws.append(raw)
    outcome = target.call(method, raws)
    FIGURES["requests_fuzzed"] += len(raws)
    _judge(target, method, raws, outcome)


# -- boundaries, one by one ------------------------------------------------------------


def _append(session: str, events: list[event_pb2.Event]) -> bytes:
    return pb.AppendEventsRequest(session_id=session, events=events).SerializeToString()


def test_boundaries_are_refused_with_the_right_status(target: FuzzTarget) -> None:
    """Oversized and deeply nested requests: named statuses, nothing stored, still up."""
    user = event_pb2.ROLE_USER
    deep = wire.length_delimited(1, wire.nested_trigger(40))  # Trigger 40 levels deep
    cases: list[tuple[str, bytes, grpc.StatusCode]] = [
        (  # over --max-message-bytes (16 MiB): refused by the transport
            "AppendEvents",
            _append(SEEDS[0], [event_pb2.Event(id="big", role=user, text="x" * (17 << 20))]),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ),
        (  # over --max-event-bytes (1 MiB)
            "AppendEvents",
            _append(SEEDS[0], [event_pb2.Event(id="big", role=user, text="x" * (2 << 20))]),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ),
        (  # over --max-events-per-append (1000)
            "AppendEvents",
            _append(SEEDS[0], [event_pb2.Event(id=f"e{i}", role=user) for i in range(1001)]),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ),
        (  # a trigger nested 40 levels (the limit is 8)
            "CreateSession",
            wire.length_delimited(1, b"deep") + wire.length_delimited(2, deep),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (  # a negative version is malformed, not stale (AIP-193): no session is ever at one
            "UpdateSession",
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id=SEEDS[1], labels={"a": "b"}),
                update_mask=FieldMask(paths=["labels"]),
                expected_version=-5,
            ).SerializeToString(),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            "AppendEvents",
            pb.AppendEventsRequest(
                session_id=SEEDS[2],
                events=[event_pb2.Event(id="neg", role=user)],
                expected_version=-1,
            ).SerializeToString(),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (  # and a negative page size
            "ListEvents",
            pb.ListEventsRequest(session_id=SEEDS[0], page_size=-7).SerializeToString(),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
    ]
    for method, raw, expected in cases:
        outcome = target.call(method, [raw])
        FIGURES["requests_fuzzed"] += 1
        assert outcome.code == expected, f"{method}: {outcome.code} {outcome.details[:200]}"
        _judge(target, method, [raw], outcome)
    listed = target.stub.ListEvents(
        pb.ListEventsRequest(session_id=SEEDS[0], page_size=0), timeout=10
    )
    assert listed.events  # an unset page size means the default


@pytest.mark.parametrize(
    ("method", "raw"),
    [
        ("GetSession", wire.length_delimited(1, b"\xff\xfe")),  # session_id: invalid UTF-8
        ("GetSession", b"\x0a\xff"),  # a length running past the end
        (  # protobuf's recursion limit (100), far past the trigger limit
            "CreateSession",
            wire.length_delimited(1, b"deep")
            + wire.length_delimited(2, wire.policy_with_trigger(wire.nested_trigger(60))),
        ),
    ],
)
def test_undecodable_request_still_stores_nothing_and_the_server_stays_up(
    target: FuzzTarget, method: str, raw: bytes
) -> None:
    outcome = target.call(method, [raw])
    FIGURES["requests_fuzzed"] += 1
    assert outcome.code != grpc.StatusCode.OK
    _judge(target, method, [raw], outcome)


# -- garbage on the socket -------------------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


def _garbage(kind: str, rng: random.Random) -> bytes:
    if kind == "random":
        return rng.randbytes(rng.randrange(1, 4096))
    if kind == "truncated_preface":
        return PREFACE[: rng.randrange(1, len(PREFACE))]
    frames = [
        _frame(4, 0, 0, b""),  # an empty SETTINGS, then nonsense
        _frame(rng.randrange(256), rng.randrange(256), rng.randrange(2**31), rng.randbytes(64)),
        _frame(1, 4, 1, rng.randbytes(rng.randrange(1, 200))),  # HEADERS with a garbage block
        _frame(0, 1, 3, b"\x00\x00\x00\x00\x05hello"),  # DATA on a stream never opened
        struct.pack(">I", 0xFFFFFF)[1:] + b"\x00\x00\x00\x00\x00\x01",  # a 16 MiB length
        rng.randbytes(rng.randrange(1, 512)),
    ]
    rng.shuffle(frames)
    return PREFACE + b"".join(frames)


@pytest.mark.parametrize("kind", ["random", "truncated_preface", "preface_then_garbage_frames"])
def test_garbage_on_the_socket_leaves_the_server_serving(target: FuzzTarget, kind: str) -> None:
    rng = random.Random(kind)
    host, port = target.server.address.split(":")
    for _ in range(BUDGET.garbage_connections):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(_garbage(kind, rng))
            if rng.random() < 0.5:
                sock.shutdown(socket.SHUT_WR)  # half-close, and read what the server says
                sock.settimeout(2)
                try:
                    while sock.recv(65536):
                        pass
                except (TimeoutError, ConnectionResetError):
                    pass
        FIGURES["garbage_connections"] += 1
    assert target.server.alive(), target.server.tail()
    assert target.take_snapshot() == target.snapshot
    assert target.server.serving()
    reply = target.stub.GetContext(pb.GetContextRequest(session_id=SEEDS[0]), timeout=10)
    assert reply.events
