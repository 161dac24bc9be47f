"""Tiny event builders so tests read like the spec: u("hi"), a(calls=[...]), t(results=[...])."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from sidecar.model import Event, Role, ToolCall, ToolResult

_ids = itertools.count(1)


def _id(prefix: str, given: str | None) -> str:
    return given or f"{prefix}{next(_ids)}"


def u(text: str = "hi", *, id: str | None = None, tokens: int = 10) -> Event:
    return Event(id=_id("u", id), role=Role.USER, text=text, token_count=tokens)


def a(
    text: str = "ok",
    *,
    id: str | None = None,
    calls: Iterable[str] = (),
    tokens: int = 10,
) -> Event:
    tool_calls = tuple(ToolCall(id=c, name=f"tool_{c}", arguments_json="{}") for c in calls)
    return Event(
        id=_id("a", id), role=Role.ASSISTANT, text=text, tool_calls=tool_calls, token_count=tokens
    )


def t(*, results: Iterable[str], id: str | None = None, tokens: int = 10) -> Event:
    tool_results = tuple(ToolResult(call_id=r, name=f"tool_{r}", content="done") for r in results)
    return Event(id=_id("t", id), role=Role.TOOL, tool_results=tool_results, token_count=tokens)


def s(text: str = "be nice", *, id: str | None = None, tokens: int = 10) -> Event:
    return Event(id=_id("s", id), role=Role.SYSTEM, text=text, token_count=tokens)


def summary_pair(text: str = "earlier: stuff", *, tokens: int = 10) -> list[Event]:
    return [
        Event(
            id=_id("su", None), role=Role.USER, text="Summarize", synthetic=True, token_count=tokens
        ),
        Event(
            id=_id("sa", None), role=Role.ASSISTANT, text=text, synthetic=True, token_count=tokens
        ),
    ]


def ids(events: Sequence[Event]) -> list[str]:
    return [e.id for e in events]
