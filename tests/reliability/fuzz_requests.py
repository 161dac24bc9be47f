"""Hypothesis strategies for every request of ``compaction.v1.CompactionService``.

Requests are generated from the message descriptors, so every field of every
RPC is covered and a field added to a proto is fuzzed without touching this
file. Values mix the plausible (the seeded sessions' ids, valid event ids and
JSON, page tokens the server really issued) with boundaries (0, -1, the int32
and int64 extremes, empty and oversized strings, NaN) and the malformed
(unknown enum numbers, NUL, right-to-left marks and emoji, crafted page
tokens, triggers nested far past the limit). ``corrupt`` then optionally
mangles the serialized bytes: unknown fields, invalid UTF-8 in a string field,
a wrong wire type, truncation, or plain random bytes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor as d
from google.protobuf.message import Message
from hypothesis import strategies as st

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import policy_pb2
from tests.reliability import wire

SERVICE = pb.DESCRIPTOR.services_by_name["CompactionService"]
METHODS = [m.name for m in SERVICE.methods]

SEEDS = ("seed-0", "seed-1", "seed-2")
MAX_DEPTH = 9  # message nesting the generic generator goes to (triggers nest further below)

INT32 = (0, 1, -1, 2, 7, 100, 1000, 1001, 2**31 - 1, -(2**31))
INT64 = (*INT32, 2**53, 2**63 - 1, -(2**63))
HUGE_TEXT = "x" * ((1 << 20) + 16)  # over the default max_event_bytes (1 MiB)


@dataclass
class Pools:
    """Values learnt from the running server (page tokens it issued), shared by strategies."""

    page_tokens: list[str] = field(default_factory=list)


POOLS = Pools()


def _b64(payload: Any) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


CRAFTED_TOKENS = [
    _b64(["events", "x", 10**30]),
    _b64(["events", "x", -(2**70)]),
    _b64(["sessions", "x", "y"]),
    _b64(["search", "x", 1e308]),
    _b64(["search", "x", -1]),
    _b64(b"[" * 3000),
    _b64(b"\xff\xfe"),
    _b64(["events"]),
    _b64({"a": 1}),
    _b64(None),
    "not base64 at all!",
    "====",
]

valid_id = st.from_regex(r"\A[A-Za-z0-9._:~@/+=-]{1,24}\Z")
garbage_text = st.text(max_size=40)
odd_text = st.sampled_from(["", " ", "\x00", "a\x00b", "x" * 129, "é" * 200, "😀", "\u202e"])


def _string(name: str) -> st.SearchStrategy[str]:
    """Plausible values for a field by its name, then boundaries and garbage."""
    plausible: st.SearchStrategy[str]
    if name == "session_id":
        plausible = st.sampled_from([*SEEDS, "fuzz-a", "fuzz-b"]) | valid_id
    elif name in ("id", "call_id", "request_id"):
        plausible = valid_id
    elif name == "page_token":
        plausible = st.sampled_from(CRAFTED_TOKENS) | st.builds(
            lambda i: POOLS.page_tokens[i % len(POOLS.page_tokens)] if POOLS.page_tokens else "",
            st.integers(0, 100),
        )
    elif name == "arguments_json":
        plausible = st.sampled_from(["{}", '{"q": 1}', "[1, 2]", "{", "nul\x00", "1e999"])
    elif name == "query":
        plausible = st.sampled_from(["question", 'a "b', "foo AND (", "*", "NEAR(a b)", "x:y"])
    elif name == "mime_type":
        plausible = st.sampled_from(["image/png", "text/plain"])
    elif name == "paths":
        plausible = st.sampled_from(["policy", "labels", "session_id", "version", ""])
    elif name in ("text", "content"):
        plausible = st.text(max_size=200) | st.just(HUGE_TEXT)
    else:
        plausible = garbage_text
    return st.one_of(plausible, plausible, garbage_text, odd_text)


def _scalar(f: Any) -> st.SearchStrategy[Any]:
    """Values for a scalar field (``f``: a FieldDescriptor, of the pure or the upb kind)."""
    t = f.type
    if t == d.FieldDescriptor.TYPE_STRING:
        return _string(f.name)
    if t == d.FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == d.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (d.FieldDescriptor.TYPE_INT32, d.FieldDescriptor.TYPE_SINT32):
        return st.sampled_from(INT32) | st.integers(-(2**31), 2**31 - 1)
    if t in (d.FieldDescriptor.TYPE_INT64, d.FieldDescriptor.TYPE_SINT64):
        return st.sampled_from(INT64) | st.integers(-(2**63), 2**63 - 1)
    if t == d.FieldDescriptor.TYPE_FLOAT:
        return st.floats(width=32)
    if t == d.FieldDescriptor.TYPE_DOUBLE:
        return st.floats()
    if t == d.FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in f.enum_type.values]
        return st.sampled_from(known) | st.sampled_from([-1, 5, 99, 2**31 - 1, -(2**31)])
    raise NotImplementedError(f"no strategy for {f.full_name} (type {t})")


def _timestamp(draw: Callable[..., Any], into: Message) -> None:
    into.seconds = draw(  # type: ignore[attr-defined]
        st.sampled_from([0, 1, -1, 1_700_000_000, 253402300799, 253402300800, 2**62, -(2**62)])
    )
    into.nanos = draw(st.sampled_from([0, 1, 999_999_999, 1_000_000_000, -1]))  # type: ignore[attr-defined]


@st.composite
def deep_trigger(draw: Callable[..., Any]) -> policy_pb2.Trigger:
    """any_of/all_of nested 1-40 levels: past the server's limit (8), within protobuf's (100)."""
    depth = draw(st.integers(1, 40))
    trigger = policy_pb2.Trigger(turn_count=draw(st.sampled_from([3, 0, -1])))
    for _ in range(depth):
        outer = policy_pb2.Trigger()
        branch = outer.any_of if draw(st.booleans()) else outer.all_of
        branch.triggers.append(trigger)
        trigger = outer
    return trigger


def fill(draw: Callable[..., Any], message: Message, depth: int = 0) -> None:
    """Set a random subset of ``message``'s fields, recursively (oneofs: the last set wins)."""
    descriptor = message.DESCRIPTOR
    if descriptor.full_name == "google.protobuf.Timestamp":
        _timestamp(draw, message)
        return
    for f in descriptor.fields:
        if not draw(st.booleans()):
            continue
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            key_field, value_field = f.message_type.fields
            entries = draw(
                st.dictionaries(_scalar(key_field), _scalar(value_field), max_size=4)
                | st.just({f"k{i}": "v" for i in range(70)})  # over the 64-entry limits
            )
            getattr(message, f.name).update(entries)
            continue
        if f.is_repeated:
            count = draw(st.integers(0, 3))
            container = getattr(message, f.name)
            for _ in range(count):
                if f.message_type is None:
                    container.append(draw(_scalar(f)))
                elif depth < MAX_DEPTH:
                    fill(draw, container.add(), depth + 1)
            continue
        if f.message_type is None:
            setattr(message, f.name, draw(_scalar(f)))
        elif f.message_type.full_name == "compaction.v1.Trigger" and draw(st.booleans()):
            getattr(message, f.name).CopyFrom(draw(deep_trigger()))
        elif depth < MAX_DEPTH:
            child = getattr(message, f.name)
            child.SetInParent()
            fill(draw, child, depth + 1)


def request_class(method: str) -> type[Message]:
    from google.protobuf import message_factory

    descriptor = SERVICE.methods_by_name[method].input_type
    return message_factory.GetMessageClass(descriptor)


@st.composite
def request(draw: Callable[..., Any], method: str) -> Message:
    message = request_class(method)()
    fill(draw, message)
    return message


def _string_field_numbers(descriptor: d.Descriptor) -> list[int]:
    return [f.number for f in descriptor.fields if f.type == d.FieldDescriptor.TYPE_STRING]


@st.composite
def corrupt(draw: Callable[..., Any], method: str, raw: bytes) -> tuple[str, bytes]:
    """Mangle a serialized request; returns (what was done, the bytes)."""
    descriptor = SERVICE.methods_by_name[method].input_type
    kind = draw(
        st.sampled_from(
            ["none", "none", "unknown_field", "bad_utf8", "wrong_wire_type", "truncate", "random"]
        )
    )
    if kind == "unknown_field":
        number = draw(st.integers(50, 2**29 - 1))
        extra = draw(
            st.sampled_from(
                [
                    wire.varint_field(number, 2**64 - 1),
                    wire.length_delimited(number, b"\xff" * 5),
                    wire.fixed_field(number, wire.FIXED32, b"\x00\x01\x02\x03"),
                    wire.fixed_field(number, wire.FIXED64, b"\xff" * 8),
                ]
            )
        )
        return kind, raw + extra
    if kind == "bad_utf8":
        numbers = _string_field_numbers(descriptor)
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"ok\x80ok"]))
        if method in ("AppendEvents", "StreamEvents"):  # inside an event: Event.text is field 4
            events_field = 2 if method == "AppendEvents" else 3
            return kind, raw + wire.length_delimited(events_field, wire.length_delimited(4, bad))
        if not numbers:  # UpdateSession: its strings live in field 1, the Session
            return kind, raw + wire.length_delimited(1, wire.length_delimited(1, bad))
        return kind, raw + wire.length_delimited(draw(st.sampled_from(numbers)), bad)
    if kind == "wrong_wire_type":
        return kind, raw + wire.fixed_field(1, wire.FIXED32, b"\x00\x00\x00\x00")
    if kind == "truncate" and raw:
        return kind, raw[: draw(st.integers(0, len(raw) - 1))]
    if kind == "random":
        return kind, draw(st.binary(min_size=1, max_size=64))
    return "none", raw


def parses(method: str, raw: bytes) -> bool:
    """Whether the server's protobuf runtime (the same one) can decode ``raw`` at all."""
    from google.protobuf.message import DecodeError

    try:
        request_class(method).FromString(raw)
    except DecodeError:
        return False
    return True
