"""Raw protobuf wire encoding, to put on the wire what no generated client would send.

Proto ``string`` fields cannot hold invalid UTF-8 through the Python classes,
and unknown fields, wrong wire types or truncated messages cannot be built
with them at all; these helpers write the bytes by hand (varints, tags,
length-delimited records), following the protobuf encoding spec.
"""

from __future__ import annotations

VARINT = 0
FIXED64 = 1
LEN = 2
FIXED32 = 5


def varint(value: int) -> bytes:
    """Base-128 varint; negative numbers as their 64-bit two's complement (as int32/int64 do)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(field_number: int, wire_type: int) -> bytes:
    return varint((field_number << 3) | wire_type)


def length_delimited(field_number: int, payload: bytes) -> bytes:
    return tag(field_number, LEN) + varint(len(payload)) + payload


def varint_field(field_number: int, value: int) -> bytes:
    return tag(field_number, VARINT) + varint(value)


def fixed_field(field_number: int, wire_type: int, payload: bytes) -> bytes:
    assert len(payload) == (8 if wire_type == FIXED64 else 4)
    return tag(field_number, wire_type) + payload


def nested_trigger(depth: int) -> bytes:
    """A Trigger nested ``depth`` times through any_of (field 5) / TriggerList.triggers (1)."""
    inner = varint_field(1, 3)  # turn_count: 3
    for _ in range(depth):
        inner = length_delimited(5, length_delimited(1, inner))
    return inner


def policy_with_trigger(trigger: bytes) -> bytes:
    """CompactionPolicy{trigger: <raw>, strategy: {sliding_window: {}}}."""
    return length_delimited(1, trigger) + length_delimited(2, length_delimited(1, b""))
