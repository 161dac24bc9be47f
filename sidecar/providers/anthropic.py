"""The window as an Anthropic Messages request: ``system`` and ``messages``.

An assistant message is its thinking blocks, then its text, then a
``tool_use`` block per call; the answers are ``tool_result`` blocks
(``is_error`` kept) opening the user message right after it, as the API
requires. A reasoning block is ``thinking`` (text and signature) or, when
redacted, ``redacted_thinking`` (its data); signatures are the strings the
API returned, stored as their UTF-8 bytes. A signed block with no text is
the API's own when it omits the thinking (``display: "omitted"``, the
default on the newest models) and goes back as it came, with empty
``thinking``: the API wants the current tool loop's thinking back
unchanged. Dropped, which the API allows for earlier turns: a block whose
text our clearing emptied (the event is ``cleared``; clearing never
reaches the newest turn), a block without a signature, and a block
another provider wrote (``wire.origin``), whose signature it would refuse.
Messages of one role in a row are merged (the roles must alternate; a
merged assistant message keeps its thinking blocks first) and a user
message opens the conversation. A text block holds something other than
whitespace, or is not sent (the API refuses it). Tool ids are sent as they
are when they match ``^[a-zA-Z0-9_-]+$``, the API's pattern, and otherwise
as ``tool_id`` maps them (on the call and its result alike). User content
takes images (JPEG, PNG, GIF, WebP) and PDFs, inline (base64) or by URL,
and inline plain text as a document; other parts, and any part of an
assistant message, are their placeholder text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from sidecar.model import Event, Part, Reasoning, ToolResult
from sidecar.providers import incremental
from sidecar.providers.conversation import LEADING_USER_TEXT, Answer, orphan_text
from sidecar.providers.fragments import NOTHING_KEPT, Fragments
from sidecar.providers.wire import (
    Block,
    Chunk,
    JsonObject,
    array,
    b64,
    block,
    chunk,
    dumps,
    object_of,
    origin,
    part_placeholder,
    text_with_placeholders,
    utf8,
)

_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_THINKING = frozenset({"thinking", "redacted_thinking"})
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_TOOL_ID = re.compile(r"[^a-zA-Z0-9_-]")
_KEPT_OF_ID = 64  # of an id that needs mapping, the characters kept before the hash


def tool_id(call_id: str) -> str:
    """``call_id`` as a ``tool_use`` id: itself when the API takes it, else its characters
    the API takes (the others as ``_``) and 12 hex digits of its SHA-256.

    The same id maps the same way on every read, so a call and its result
    still pair; two ids that differ map apart (their hashes do), and a
    mapped id is never one the API takes as it is unless that id was made
    to look like it.
    """
    if _TOOL_ID.fullmatch(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:12]
    return f"{_NOT_TOOL_ID.sub('_', call_id[:_KEPT_OF_ID])}_{digest}"


def render_json(events: Sequence[Event], fragments: Fragments = NOTHING_KEPT) -> str:
    """``{"system"?: ..., "messages": [...]}`` for the window ``events``, as JSON."""
    return incremental.render(events, fragments, _LAYOUT)


def _message(role: str, chunks: list[Chunk]) -> str:
    if len(chunks) > 1 and role == "assistant" and any(_thinks(c) for c in chunks[1:]):
        # merged, with thinking after the first event's: the thinking goes first (stable)
        blocks = sorted((b for c in chunks for b in c.blocks), key=_not_thinking)
        chunks = [chunk(blocks)]
    return f'{{"role":"{role}","content":{array(chunks)}}}'


def _frame(system: str, messages: str) -> str:
    head = f'"system":{dumps(system)},' if system else ""
    return f'{{{head}"messages":[{messages}]}}'


def _thinks(piece: Chunk) -> bool:
    return any(b.kind in _THINKING for b in piece.blocks)


def _not_thinking(piece: Block) -> bool:
    return piece.kind not in _THINKING


def _text(text: str) -> Block:
    return block({"type": "text", "text": text}, "text")


def _thinking(event: Event, reasoning: Reasoning) -> JsonObject | None:
    signature = utf8(reasoning.signature) if reasoning.signature else None
    if signature is None or origin(event, reasoning) not in ("", "anthropic"):
        return None
    if reasoning.redacted:
        return {"type": "redacted_thinking", "data": signature}
    if not reasoning.text and event.cleared:  # our clearing emptied it
        return None
    return {"type": "thinking", "thinking": reasoning.text, "signature": signature}


def _assistant(event: Event) -> list[Block]:
    blocks = [b for b in (_thinking(event, r) for r in event.reasoning) if b is not None]
    text = text_with_placeholders(event)
    if text and not text.isspace():
        blocks.append({"type": "text", "text": text})
    blocks += [
        {
            "type": "tool_use",
            "id": tool_id(c.id),
            "name": c.name,
            "input": object_of(c.arguments_json),
        }
        for c in event.tool_calls
    ]
    return [block(b, str(b["type"])) for b in blocks]


def _user(event: Event) -> list[Block]:
    text = event.text
    blocks = [_text(text)] if text and not text.isspace() else []
    blocks += [block(_media(p)) for p in event.parts if p.data or p.uri]
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
    text = f"{part_placeholder(part)} {part.uri}" if part.uri else part_placeholder(part)
    return {"type": "text", "text": text}


def _orphan(result: ToolResult) -> list[Block]:
    return [_text(orphan_text(result))]


def _result(answer: Answer) -> list[Block]:
    result: JsonObject = {"type": "tool_result", "tool_use_id": tool_id(answer.call.id)}
    if answer.content and not answer.content.isspace():
        result["content"] = answer.content
    if answer.is_error:
        result["is_error"] = True
    return [block(result, "tool_result")]


_LAYOUT = incremental.Layout(
    ("anthropic", "assistant", "user"),
    _assistant,
    _user,
    _result,
    _orphan,
    incremental.merged(_message, "user", _text(LEADING_USER_TEXT)),
    _frame,
)
