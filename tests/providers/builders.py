"""Tiny builders for rendering tests: u("hi"), a(calls=[call("c1")]), t(result("c1")), ..."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult

_ids = itertools.count(1)


def _id(prefix: str, given: str | None) -> str:
    return given or f"{prefix}{next(_ids)}"


def s(text: str = "be nice", *, id: str | None = None) -> Event:
    return Event(id=_id("s", id), role=Role.SYSTEM, text=text)


def u(text: str = "hi", *, id: str | None = None, parts: Iterable[Part] = ()) -> Event:
    return Event(id=_id("u", id), role=Role.USER, text=text, parts=tuple(parts))


def call(id: str, name: str = "lookup", args: str = '{"q": 1}', signature: bytes = b"") -> ToolCall:
    return ToolCall(id=id, name=name, arguments_json=args, signature=signature)


def thought(
    text: str = "", signature: bytes = b"", *, redacted: bool = False, id: str = ""
) -> Reasoning:
    return Reasoning(text=text, signature=signature, redacted=redacted, id=id)


def a(
    text: str = "",
    *,
    id: str | None = None,
    calls: Iterable[ToolCall] = (),
    reasoning: Iterable[Reasoning] = (),
    parts: Iterable[Part] = (),
) -> Event:
    return Event(
        id=_id("a", id),
        role=Role.ASSISTANT,
        text=text,
        tool_calls=tuple(calls),
        reasoning=tuple(reasoning),
        parts=tuple(parts),
    )


def result(call_id: str, content: str = "done", *, error: bool = False) -> ToolResult:
    return ToolResult(call_id=call_id, name="lookup", content=content, is_error=error)


def t(*results: ToolResult, id: str | None = None, text: str = "") -> Event:
    return Event(id=_id("t", id), role=Role.TOOL, tool_results=results, text=text)


def summary_pair(text: str = "earlier: stuff") -> list[Event]:
    return [
        Event(id=_id("su", None), role=Role.USER, text="Summarize", synthetic=True),
        Event(id=_id("sa", None), role=Role.ASSISTANT, text=text, synthetic=True),
    ]


PNG = Part("image/png", data=b"\x89PNG\r\n\x1a\n")
REMOTE_PDF = Part("application/pdf", uri="https://example.com/report.pdf")
