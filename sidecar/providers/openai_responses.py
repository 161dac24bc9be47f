"""The window as an OpenAI Responses request: ``instructions`` and ``input`` items.

The system text goes in ``instructions`` (not a system message: it is the
field the API documents for it, and ``input`` then holds the conversation
only). An assistant event is its ``reasoning`` items, then a ``message``
(text, parts as placeholders: assistant content is text), then a
``function_call`` item per call; each answer is a ``function_call_output``
right after (the API has no error flag: an error is its content).

A reasoning item carries the block's ``id`` and its text as one
``summary_text``; ``encrypted_content`` is the signature as the string the
API returned, which the sidecar stores as its UTF-8 bytes (so an agent sets
``signature = encrypted_content.encode()``). A block without an id, a
redacted one (Anthropic's) and one whose signature is not UTF-8 (another
provider's) cannot be sent and are dropped; so is a reasoning item that no
assistant item follows, which the API refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.model import Event, Part, Reasoning, ToolResult
from sidecar.providers.conversation import Answer, conversation, messages, orphan_text
from sidecar.providers.wire import JsonObject, data_url, filename, text_with_placeholders, utf8

# What may follow a reasoning item: the assistant output it reasoned for.
_FOLLOWS_REASONING = frozenset({"reasoning", "function_call", "assistant"})


def render(events: Sequence[Event]) -> JsonObject:
    """``{"instructions"?: ..., "input": [...]}`` for the window ``events``."""
    shaped = conversation(events)
    items: list[JsonObject] = []
    for _, said in messages(shaped, _assistant, _user, _output, _orphan):
        items += said
    body: JsonObject = {}
    if shaped.system:
        body["instructions"] = shaped.system
    body["input"] = _followed_reasoning(items)
    return body


def _output(answer: Answer) -> JsonObject:
    return {"type": "function_call_output", "call_id": answer.call.id, "output": answer.content}


def _orphan(result: ToolResult) -> JsonObject:
    return _message("user", orphan_text(result))


def _message(role: str, content: object) -> JsonObject:
    return {"type": "message", "role": role, "content": content}


def _reasoning(block: Reasoning) -> JsonObject | None:
    if block.redacted or not block.id:
        return None
    item: JsonObject = {
        "type": "reasoning",
        "id": block.id,
        "summary": [{"type": "summary_text", "text": block.text}] if block.text else [],
    }
    if block.signature:
        encrypted = utf8(block.signature)
        if encrypted is None:
            return None
        item["encrypted_content"] = encrypted
    return item


def _assistant(event: Event) -> list[JsonObject]:
    items = [r for r in map(_reasoning, event.reasoning) if r is not None]
    text = text_with_placeholders(event)
    if text:
        items.append(_message("assistant", text))
    items += [
        {
            "type": "function_call",
            "call_id": c.id,
            "name": c.name,
            "arguments": c.arguments_json or "{}",
        }
        for c in event.tool_calls
    ]
    return items


def _user(event: Event) -> list[JsonObject]:
    parts = [p for p in event.parts if p.data or p.uri]
    if not parts:
        return [_message("user", event.text)] if event.text else []
    content: list[JsonObject] = [{"type": "input_text", "text": event.text}] if event.text else []
    content += [_content_part(p, i) for i, p in enumerate(parts)]
    return [_message("user", content)]


def _content_part(part: Part, index: int) -> JsonObject:
    if part.mime_type.startswith("image/"):
        return {"type": "input_image", "detail": "auto", "image_url": part.uri or data_url(part)}
    if part.uri:
        return {"type": "input_file", "file_url": part.uri}
    return {"type": "input_file", "file_data": data_url(part), "filename": filename(part, index)}


def _kind(item: JsonObject) -> object:
    return item["role"] if item["type"] == "message" else item["type"]


def _followed_reasoning(items: list[JsonObject]) -> list[JsonObject]:
    """``items`` without the reasoning items that no assistant item follows."""
    kept: list[JsonObject] = []
    follower: object = None  # the kind of the next item kept, walking backwards
    for item in reversed(items):
        kind = _kind(item)
        if kind == "reasoning" and follower not in _FOLLOWS_REASONING:
            continue
        kept.append(item)
        follower = kind
    kept.reverse()
    return kept
