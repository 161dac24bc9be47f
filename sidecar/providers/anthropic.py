"""The window as an Anthropic Messages request: ``system`` and ``messages``.

An assistant message is its thinking blocks, then its text, then a
``tool_use`` block per call; the answers are ``tool_result`` blocks
(``is_error`` kept) opening the user message right after it, as the API
requires. A reasoning block is ``thinking`` (text and signature) or, when
redacted, ``redacted_thinking`` (its data); signatures are the strings the
API returned, stored as their UTF-8 bytes. A block with text but no
signature, with a signature but no text (clearing leaves it so), or with a
signature that is not UTF-8 (another provider's) would be refused: it is
dropped, which the API allows, since it keeps only the current tool loop's
thinking anyway. Messages of one role in a row are merged (the roles must
alternate; a merged assistant message keeps its thinking blocks first) and
a user message opens the conversation. User content takes images (JPEG,
PNG, GIF, WebP) and PDFs, inline (base64) or by URL, and inline plain text
as a document; other parts, and any part of an assistant message, are
their placeholder text.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.model import Event, Part, Reasoning, Role, ToolResult
from sidecar.providers.conversation import (
    LEADING_USER_TEXT,
    Answer,
    conversation,
    messages,
    orphan_text,
)
from sidecar.providers.wire import (
    JsonObject,
    alternating,
    b64,
    object_of,
    part_placeholder,
    text_with_placeholders,
    utf8,
)

_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_THINKING = frozenset({"thinking", "redacted_thinking"})


def render(events: Sequence[Event]) -> JsonObject:
    """``{"system"?: ..., "messages": [...]}`` for the window ``events``."""
    shaped = conversation(events)
    said = messages(shaped, _assistant, _user, _result, _orphan)
    named = [("assistant" if role is Role.ASSISTANT else "user", blocks) for role, blocks in said]
    out: list[JsonObject] = []
    for role, blocks in alternating(named, "user", _text(LEADING_USER_TEXT)):
        if role == "assistant":
            blocks.sort(key=lambda block: block["type"] not in _THINKING)  # stable
        out.append({"role": role, "content": blocks})
    body: JsonObject = {}
    if shaped.system:
        body["system"] = shaped.system
    body["messages"] = out
    return body


def _text(text: str) -> JsonObject:
    return {"type": "text", "text": text}


def _thinking(block: Reasoning) -> JsonObject | None:
    signature = utf8(block.signature) if block.signature else None
    if signature is None:
        return None
    if block.redacted:
        return {"type": "redacted_thinking", "data": signature}
    if not block.text:
        return None
    return {"type": "thinking", "thinking": block.text, "signature": signature}


def _assistant(event: Event) -> list[JsonObject]:
    blocks = [b for b in map(_thinking, event.reasoning) if b is not None]
    text = text_with_placeholders(event)
    if text:
        blocks.append(_text(text))
    blocks += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": object_of(c.arguments_json)}
        for c in event.tool_calls
    ]
    return blocks


def _user(event: Event) -> list[JsonObject]:
    blocks = [_text(event.text)] if event.text else []
    blocks += [_media(p) for p in event.parts if p.data or p.uri]
    return blocks


def _media(part: Part) -> JsonObject:
    mime = part.mime_type
    if mime in _IMAGES or mime == "application/pdf":
        kind = "image" if mime in _IMAGES else "document"
        if part.uri:
            return {"type": kind, "source": {"type": "url", "url": part.uri}}
        return {
            "type": kind,
            "source": {"type": "base64", "media_type": mime, "data": b64(part.data)},
        }
    if mime == "text/plain" and not part.uri and (text := utf8(part.data)) is not None:
        return {"type": "document", "source": {"type": "text", "media_type": mime, "data": text}}
    return _text(f"{part_placeholder(part)} {part.uri}" if part.uri else part_placeholder(part))


def _orphan(result: ToolResult) -> JsonObject:
    return _text(orphan_text(result))


def _result(answer: Answer) -> JsonObject:
    block: JsonObject = {"type": "tool_result", "tool_use_id": answer.call.id}
    if answer.content:
        block["content"] = answer.content
    if answer.is_error:
        block["is_error"] = True
    return block
