"""How LangChain messages map to the service's events and back, and a window to the model's.

A message becomes an event field by field (text, tool calls and results,
reasoning and signatures through ``langchain_reasoning``), under its own id
when the service accepts it, else a stable hash of it (``event_id``). The
model is given the window in log order, each kept event as the state's own
message (``compacted_messages``): a cleared one as a copy showing its
placeholder, and an orphaned ``ToolMessage`` as the user text the server's
renderings give it (``orphan_text``).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from sidecar.adapters.clients import fitted, strict_json
from sidecar.adapters.langchain_reasoning import (
    call_signatures,
    provenance,
    reasoning_of,
    restored,
    verbatim,
    with_reasoning,
)
from sidecar.client import SessionContext
from sidecar.engine.validation import MAX_AUTHOR_CHARS
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.providers.conversation import orphan_text

_ID = re.compile(r"[A-Za-z0-9._:~@/+=-]{1,128}")


def _text(message: BaseMessage) -> str:
    """The text of a message; non-text blocks (images...) are not sent to the service."""
    if isinstance(message.content, str):
        return message.content
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def event_id(message: BaseMessage) -> str:
    """The message's id when the service accepts it, else a stable hash of the message."""
    if message.id and _ID.fullmatch(message.id):
        return message.id
    basis = message.id or json.dumps(message.model_dump(mode="json"), sort_keys=True)
    return "lc-" + hashlib.sha256(basis.encode()).hexdigest()[:40]


def message_to_event(message: BaseMessage) -> Event | None:
    """Our event for a LangChain message (None for kinds the service has no role for)."""
    common: dict[str, Any] = {"id": event_id(message), "text": _text(message)}
    common["metadata"] = {"lc.type": message.type}
    if isinstance(message, HumanMessage):
        return Event(role=Role.USER, **common)
    if isinstance(message, SystemMessage):
        return Event(role=Role.SYSTEM, **common)
    if isinstance(message, AIMessage):
        signatures = call_signatures(message)
        calls = tuple(
            ToolCall(
                id=call.get("id") or f"{common['id']}-{i}",
                name=call["name"],
                arguments_json=strict_json(call.get("args", {})),
                signature=signatures.get(call.get("id") or "", b""),
            )
            for i, call in enumerate(message.tool_calls)
        )
        common["metadata"].update(verbatim(message))
        common["metadata"].update(provenance(message))
        return Event(
            role=Role.ASSISTANT,
            tool_calls=calls,
            reasoning=reasoning_of(message),
            # LangChain bounds no name; the model is given the state's own message.
            author=fitted(message.name or "", MAX_AUTHOR_CHARS),
            **common,
        )
    if isinstance(message, ToolMessage):
        result = ToolResult(
            call_id=message.tool_call_id,
            name=message.name or "",
            content=common.pop("text"),
            is_error=message.status == "error",
        )
        return Event(role=Role.TOOL, tool_results=(result,), **common)
    return None


def event_to_message(event: Event) -> AnyMessage:
    """A LangChain message for one of ours: the summary turn, or an event not in the state."""
    match event.role:
        case Role.USER:
            return HumanMessage(content=event.text, id=event.id)
        case Role.SYSTEM:
            return SystemMessage(content=event.text, id=event.id)
        case Role.TOOL:
            result = event.tool_results[0]
            return ToolMessage(
                content=result.content,
                tool_call_id=result.call_id,
                name=result.name or None,
                status="error" if result.is_error else "success",
                id=event.id,
            )
        case Role.ASSISTANT:
            calls = [
                {"id": c.id, "name": c.name, "args": json.loads(c.arguments_json or "{}")}
                for c in event.tool_calls
            ]
            content, kwargs = restored(event)
            if event.cleared:
                content, kwargs = with_reasoning(content, kwargs, event.reasoning)
            return AIMessage(
                content=content, additional_kwargs=kwargs, tool_calls=calls, id=event.id
            )
    raise ValueError(f"unknown role {event.role!r}")


def compacted_messages(
    window: Sequence[Event],
    messages: Sequence[AnyMessage],
    mirrored: Collection[str] | None = None,
) -> list[AnyMessage]:
    """The model's messages: the state's own messages in the state's order, less what the
    window archived, with the window's summary turn before the kept message it precedes.

    The order is the state's, not the log's: a message another middleware put before
    older ones (``SummarizationMiddleware``'s summary, first in the state but appended
    last) stays where the state has it. A cleared event's message is a copy showing its
    placeholder (the state's message keeps the original, as the log does).

    Only messages the window archived, and ones the graph no longer has
    (removed from its state), are left out. A message edited in place keeps
    its id, so the model gets the edited one. Messages the session has
    never seen (``mirrored``: the ids sent to it; by default everything up to
    the last message the window keeps) — another middleware's, or ones that
    reached the state after the window was read — stay where they stand,
    after a summary turn anchored at the kept message that follows them.
    System messages stay in place like any other (the latest is never archived).
    """
    kept = {e.id: e for e in window if not e.synthetic}
    if mirrored is None:
        last = max((i for i, m in enumerate(messages) if event_id(m) in kept), default=-1)
        mirrored = {event_id(m) for m in messages[: last + 1]}
    # Each run of synthetic events (the summary turn) goes before the kept event after it
    # that the state still has.
    present = {event_id(m) for m in messages}
    anchored: dict[str | None, list[Event]] = {}
    run: list[Event] = []
    for event in window:
        if event.synthetic:
            run.append(event)
        elif event.id in present and run:
            anchored[event.id] = run
            run = []
    anchored.setdefault(None, []).extend(run)
    out: list[AnyMessage] = []
    pending: list[AnyMessage] = []
    emitted: set[str] = set()
    for message in messages:
        mid = event_id(message)
        if mid in kept and mid not in emitted:
            emitted.add(mid)
            out.extend(event_to_message(e) for e in anchored.pop(mid, ()))
            out.extend(pending)
            pending = []
            event = kept[mid]
            out.append(cleared_message(message, event) if event.cleared else message)
        elif mid not in mirrored:
            pending.append(message)
    for events in anchored.values():
        out.extend(event_to_message(e) for e in events)
    out.extend(pending)
    return without_orphans(out)


def without_orphans(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``messages`` with each orphan ``ToolMessage`` (no call before it still waiting for
    its answer, valid or invalid) as a ``HumanMessage`` of its ``orphan_text``, as the
    renderings have it."""
    waiting: dict[str, int] = {}
    out: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, AIMessage):
            # An invalid call waits too: the agent answers it with an error ToolMessage,
            # and providers send it as a call (OpenAI's API needs that answer after it).
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                if call.get("id"):
                    waiting[str(call["id"])] = waiting.get(str(call["id"]), 0) + 1
        elif isinstance(message, ToolMessage):
            if waiting.get(message.tool_call_id, 0) > 0:
                waiting[message.tool_call_id] -= 1
            else:
                result = ToolResult(
                    call_id=message.tool_call_id,
                    name=message.name or "",
                    content=_text(message),
                    is_error=message.status == "error",
                )
                message = HumanMessage(content=orphan_text(result), id=message.id)
        out.append(message)
    return out


def cleared_message(message: AnyMessage, event: Event) -> AnyMessage:
    """A copy of the state's ``message`` showing what clearing left of it (the state keeps
    the original): a ``ToolMessage``'s placeholder, an ``AIMessage``'s cleared arguments
    and reasoning text (its signatures unchanged)."""
    if isinstance(message, ToolMessage) and event.tool_results:
        return message.model_copy(update={"content": event.tool_results[0].content})
    if isinstance(message, AIMessage):
        update: dict[str, Any] = {}
        if event.tool_calls:
            arguments = {c.id: c.arguments_json for c in event.tool_calls}
            update["tool_calls"] = [
                {**call, "args": json.loads(arguments[cid])}
                if (cid := call.get("id")) is not None and cid in arguments
                else call
                for call in message.tool_calls
            ]
        if event.reasoning:
            content, kwargs = with_reasoning(
                message.content, message.additional_kwargs, event.reasoning
            )
            update.update(content=content, additional_kwargs=kwargs)
        return message.model_copy(update=update)
    return message


def ensure_ids(messages: Sequence[BaseMessage]) -> None:
    """Give id-less messages an id in place, as LangChain's own middleware does, so that two
    equal messages stay two events (and the model gets both)."""
    for message in messages:
        if message.id is None:
            message.id = str(uuid.uuid4())


def prefix_end(context: SessionContext, messages: Sequence[AnyMessage]) -> int | None:
    """The index among ``messages`` of the last one the window's stable prefix gave (None
    when the prefix is empty or none of its events is among them)."""
    stable = {e.id for e in context.events[: context.stable_prefix_events]}
    return max((i for i, m in enumerate(messages) if event_id(m) in stable), default=None)
