"""How model values become SQL column values and back.

Event content (text, tool calls, tool results, parts, author, branch,
metadata) is one TEXT column of compact JSON rather than a column each or a
child table per list:

- an event is always read and written whole, so splitting it buys nothing
  and costs a join or a row per tool call on the hot append path;
- JSON is in the standard library on both ends, readable with the ``sqlite3``
  shell (``json_extract`` works for ad-hoc digging), and maps one to one to a
  PostgreSQL ``jsonb`` column;
- it is compact: short keys, no whitespace, lists of fields as positional
  arrays, empty fields left out, non-ASCII kept as UTF-8 (a CJK conversation
  is not inflated sixfold by ``\\uXXXX`` escapes). An event with only text is
  ``{"t":"..."}``.

Part bytes and signatures are base64 inside the JSON: parts are rare and
small (large media travel by ``uri``), signatures a few hundred bytes, and a
second BLOB column would complicate every read for them. A tool call's
signature is a fourth element of its array, only when set; reasoning blocks
are ``"s": [[text, signature, redacted, id], ...]``. Times are integer
microseconds since the Unix epoch, UTC: they sort and compare as numbers
(the search filters rely on it), which ISO strings with mixed offsets would
not.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ROLES = {role.value: role for role in Role}
_raw_decode = json.JSONDecoder().raw_decode


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is taken to be UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


# What json.dumps(value, separators=(",", ":"), ensure_ascii=False) builds on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_NO_LABELS = "{}"


def dump_json(value: object) -> str:
    """Compact JSON: no spaces, UTF-8 kept as is."""
    return _COMPACT.encode(value)


def encode_labels(labels: Mapping[str, str]) -> str:
    """Labels as a JSON object with sorted keys, so equal label sets store equal text."""
    if not labels:  # most sessions: every write saves the header, labels and all
        return _NO_LABELS
    return dump_json({key: labels[key] for key in sorted(labels)})


def decode_labels(raw: str) -> dict[str, str]:
    if raw == _NO_LABELS:
        return {}
    labels: dict[str, str] = json.loads(raw)
    return labels


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _tool_call(call: list[str]) -> ToolCall:
    if len(call) == 3:
        return ToolCall(call[0], call[1], call[2])
    return ToolCall(call[0], call[1], call[2], base64.b64decode(call[3]))


def _reasoning(blocks: list[list[Any]]) -> tuple[Reasoning, ...]:
    return tuple(
        Reasoning(text, base64.b64decode(signature), bool(redacted), block_id)
        for text, signature, redacted, block_id in blocks
    )


def encode_content(event: Event) -> str:
    """The client-supplied content of ``event`` as compact JSON (see the module docstring)."""
    content: dict[str, Any] = {}
    if event.text:
        content["t"] = event.text
    if event.tool_calls:
        content["c"] = [
            [c.id, c.name, c.arguments_json, _b64(c.signature)]
            if c.signature
            else [c.id, c.name, c.arguments_json]
            for c in event.tool_calls
        ]
    if event.tool_results:
        content["r"] = [
            [r.call_id, r.name, r.content, 1 if r.is_error else 0] for r in event.tool_results
        ]
    if event.parts:
        content["p"] = [
            [p.mime_type, base64.b64encode(p.data).decode("ascii"), p.uri] for p in event.parts
        ]
    if event.reasoning:
        content["s"] = [
            [r.text, _b64(r.signature), 1 if r.redacted else 0, r.id] for r in event.reasoning
        ]
    if event.author:
        content["a"] = event.author
    if event.branch:
        content["b"] = event.branch
    if event.metadata:
        content["m"] = dict(event.metadata)
    return dump_json(content)


def decode_event(
    event_id: str,
    role: str,
    content: str,
    position: int,
    token_count: int,
    synthetic: int,
    archived: int,
    create_time: int,
    cleared: int = 0,
    token_low: int | None = None,
    token_high: int | None = None,
) -> Event:
    """The Event stored in one row; the arguments are the row's columns in this order.

    On the hot path of every window read, so empty lists cost nothing and the
    JSON skips ``json.loads``'s whitespace handling (we wrote it: there is none).
    """
    fields: dict[str, Any] = _raw_decode(content)[0]
    calls = fields.get("c")
    results = fields.get("r")
    parts = fields.get("p")
    reasoning = fields.get("s")
    return Event(
        id=event_id,
        role=_ROLES[role],
        text=fields.get("t", ""),
        tool_calls=tuple(map(_tool_call, calls)) if calls else (),
        tool_results=(
            tuple(ToolResult(i, n, c, bool(err)) for i, n, c, err in results) if results else ()
        ),
        parts=tuple(Part(m, base64.b64decode(d), u) for m, d, u in parts) if parts else (),
        author=fields.get("a", ""),
        branch=fields.get("b", ""),
        metadata=fields.get("m") or {},
        create_time=_EPOCH + timedelta(microseconds=create_time),
        position=position,
        synthetic=bool(synthetic),
        archived=bool(archived),
        token_count=token_count,
        cleared=bool(cleared),
        reasoning=_reasoning(reasoning) if reasoning else (),
        token_bounds=None if token_low is None or token_high is None else (token_low, token_high),
    )
