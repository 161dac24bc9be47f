"""How ADK content maps to an event's fields and back, thoughts and signatures included.

Gemini returns its thoughts first (text parts marked ``thought``), then
text and function calls; a ``thought_signature`` sits on a thought, on the
text part, or on the first function call. Each lands in a field, so token
counts, summaries and renderings see it:

- a thought is a ``Reasoning`` (its text, its signature); one with a
  signature and no text (Anthropic's redacted thinking, as ADK maps it) is
  a redacted ``Reasoning``;
- a function call's signature is its ``ToolCall.signature``;
- a text part's signature is a ``Reasoning`` with no text, which
  ``content_of`` puts back on the text part (a thought whose text a clearing
  took keeps its signature where it was, on a part with empty text).

For those shapes ``content_of(fields)`` rebuilds the content exactly; what
it cannot rebuild (several text parts, media before the text, a thought
after it) the caller keeps verbatim, and ``cleared_content`` shows a
clearing's placeholders in that verbatim copy with every thought and
signature where it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.genai import types
from pydantic_core import to_jsonable_python

from sidecar.adapters.clients import strict_json
from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult


@dataclass(frozen=True, slots=True)
class Fields:
    """What an ADK content becomes among an event's fields."""

    text: str = ""
    reasoning: tuple[Reasoning, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    parts: tuple[Part, ...] = ()


def _json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def _response(content: str) -> dict[str, Any]:
    """A function response object from a tool result's content (JSON object or text)."""
    try:
        value = json.loads(content)
    except ValueError:
        return {"result": content}
    return value if isinstance(value, dict) else {"result": value}


def _thought(part: types.Part) -> Reasoning:
    signature = part.thought_signature or b""
    if part.text is None and signature:
        return Reasoning(signature=signature, redacted=True)
    return Reasoning(text=part.text or "", signature=signature)


def fields_of(content: types.Content | None, event_id: str) -> Fields:
    """The fields of a content, parts in order; ``event_id`` names calls that have no id."""
    parts = list(content.parts or []) if content is not None else []
    texts: list[str] = []
    reasoning: list[Reasoning] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    media: list[Part] = []
    for i, part in enumerate(parts):
        if part.thought:
            reasoning.append(_thought(part))
        elif part.text is not None:
            texts.append(part.text)
            if part.thought_signature:
                reasoning.append(Reasoning(signature=part.thought_signature))
        if part.function_call is not None:
            fc = part.function_call
            calls.append(
                ToolCall(
                    id=fc.id or f"{event_id}-{i}",  # ADK gives stored calls ids; be safe anyway
                    name=fc.name or "unknown",
                    # The service takes arguments as strict JSON: a NaN is null.
                    arguments_json=strict_json(to_jsonable_python(fc.args or {})),
                    signature=part.thought_signature or b"",
                )
            )
        if part.function_response is not None:
            fr = part.function_response
            response = fr.response or {}
            results.append(
                ToolResult(
                    call_id=fr.id or f"{event_id}-{i}",
                    name=fr.name or "",
                    content=_json(response),
                    is_error=set(response) == {"error"},
                )
            )
        if part.inline_data is not None:
            blob = part.inline_data
            media.append(
                Part(mime_type=blob.mime_type or "application/octet-stream", data=blob.data or b"")
            )
        if part.file_data is not None and part.file_data.file_uri:
            file = part.file_data
            media.append(
                Part(
                    mime_type=file.mime_type or "application/octet-stream", uri=file.file_uri or ""
                )
            )
    return Fields(
        text="".join(texts),
        reasoning=tuple(reasoning),
        tool_calls=tuple(calls),
        tool_results=tuple(results),
        parts=tuple(media),
    )


def _is_text_signature(block: Reasoning) -> bool:
    """A signature that sat on the text part: no text of its own, not redacted."""
    return not block.text and not block.redacted and bool(block.signature)


def _thought_part(block: Reasoning) -> types.Part | None:
    """The thought part of a reasoning block; None when clearing left nothing to send."""
    if block.redacted:
        return types.Part(thought=True, thought_signature=block.signature or None)
    if not block.text and not block.signature:
        return None
    return types.Part(text=block.text, thought=True, thought_signature=block.signature or None)


def content_of(event: Event) -> types.Content:
    """The ADK content an event stands for: thoughts, text, media, then calls or responses.

    The last text-less signature is the text part's (thoughts come before the
    text); an earlier one (a thought's, once clearing took its text) stays
    where its thought was, on a part with empty text.
    """
    parts: list[types.Part] = []
    last = max((i for i, r in enumerate(event.reasoning) if _is_text_signature(r)), default=-1)
    for i, block in enumerate(event.reasoning):
        if i == last:
            continue
        if _is_text_signature(block):
            parts.append(types.Part(text="", thought_signature=block.signature))
        elif (thought := _thought_part(block)) is not None:
            parts.append(thought)
    if event.text or last >= 0:
        signature = event.reasoning[last].signature if last >= 0 else None
        parts.append(types.Part(text=event.text, thought_signature=signature))
    for part in event.parts:
        if part.uri:
            parts.append(
                types.Part(file_data=types.FileData(mime_type=part.mime_type, file_uri=part.uri))
            )
        else:
            parts.append(
                types.Part(inline_data=types.Blob(mime_type=part.mime_type, data=part.data))
            )
    for call in event.tool_calls:
        args = json.loads(call.arguments_json or "{}")
        parts.append(
            types.Part(
                function_call=types.FunctionCall(id=call.id, name=call.name, args=args),
                thought_signature=call.signature or None,
            )
        )
    for result in event.tool_results:
        response = types.FunctionResponse(
            id=result.call_id, name=result.name, response=_response(result.content)
        )
        parts.append(types.Part(function_response=response))
    return types.Content(role="model" if event.role is Role.ASSISTANT else "user", parts=parts)


def cleared_content(stored: types.Content, event: Event) -> types.Content:
    """The verbatim ``stored`` content showing what a clearing left of ``event``.

    Cleared call arguments, results and reasoning text are taken from the
    event's fields by call id (reasoning by its order among the parts);
    every part stays where it was, with its signature. A thought whose text
    was cleared and that has no signature is left out: nothing of it is
    sent back.
    """
    calls = {c.id: c for c in event.tool_calls}
    results = {r.call_id: r for r in event.tool_results}
    reasoning: Sequence[Reasoning] = event.reasoning
    parts: list[types.Part] = []
    blocks = 0
    for i, part in enumerate(stored.parts or []):
        update: dict[str, Any] = {}
        if part.thought or (part.text is not None and part.thought_signature):
            block = reasoning[blocks] if blocks < len(reasoning) else None
            blocks += 1
            if part.thought and block is not None and not block.redacted:
                if not block.text and not part.thought_signature:
                    continue
                update["text"] = block.text
        fc = part.function_call
        if fc is not None and (call := calls.get(fc.id or f"{event.id}-{i}")) is not None:
            args = json.loads(call.arguments_json or "{}")
            update["function_call"] = fc.model_copy(update={"args": args})
        fr = part.function_response
        if fr is not None and (result := results.get(fr.id or f"{event.id}-{i}")) is not None:
            response = _response(result.content)
            update["function_response"] = fr.model_copy(update={"response": response})
        parts.append(part.model_copy(update=update) if update else part)
    return stored.model_copy(update={"parts": parts})
