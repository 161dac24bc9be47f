"""The window as an OpenAI Responses request: ``instructions`` and ``input`` items.

The system text goes in ``instructions`` (not a system message: it is the
field the API documents for it, and ``input`` then holds the conversation
only). An assistant event is its ``reasoning`` items, then a ``message``
(text, parts as placeholders: assistant content is text), then a
``function_call`` item per call; each answer is a ``function_call_output``
right after (the API has no error flag: an error is its content).

User content takes the images OpenAI reads (PNG, JPEG, WebP, GIF:
``input_image``) and, as ``input_file`` (by URL or inline), the files
``input_file`` reads: PDFs, documents, text and code, spreadsheets. Any
other part (audio, video, archives, other images) is its placeholder
text, with its URI when it has one; so is any part of an assistant
message.

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
from sidecar.providers import incremental
from sidecar.providers.conversation import Answer, orphan_text
from sidecar.providers.fragments import NOTHING_KEPT, Fragments
from sidecar.providers.wire import (
    OPENAI_IMAGES,
    Block,
    Chunk,
    JsonObject,
    Message,
    block,
    chunk,
    data_url,
    dumps,
    filename,
    media_type,
    part_placeholder,
    text_with_placeholders,
    utf8,
)

# What ``input_file`` reads besides text/* (text and code): PDFs, documents, spreadsheets.
_FILES = frozenset(
    {
        "application/pdf",
        "application/json",
        "application/xml",
        "application/javascript",
        "application/typescript",
        "application/x-sh",
        "application/x-python",
        "application/rtf",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.ms-powerpoint",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.ms-excel",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.oasis.opendocument.spreadsheet",
    }
)

# What may follow a reasoning item: the assistant output it reasoned for.
_FOLLOWS_REASONING = frozenset({"reasoning", "function_call", "assistant"})


def render_json(events: Sequence[Event], fragments: Fragments = NOTHING_KEPT) -> str:
    """``{"instructions"?: ..., "input": [...]}`` for the window ``events``, as JSON."""
    return incremental.render(events, fragments, _LAYOUT)


def _frame(system: str, items: str) -> str:
    head = f'"instructions":{dumps(system)},' if system else ""
    return f'{{{head}"input":[{items}]}}'


def _output(answer: Answer) -> list[Block]:
    item: JsonObject = {
        "type": "function_call_output",
        "call_id": answer.call.id,
        "output": answer.content,
    }
    return [block(item, "function_call_output")]


def _orphan(result: ToolResult) -> list[Block]:
    return [block(_message("user", orphan_text(result)), "user")]


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


def _assistant(event: Event) -> list[Block]:
    items = [block(r, "reasoning") for r in map(_reasoning, event.reasoning) if r is not None]
    text = text_with_placeholders(event)
    if text:
        items.append(block(_message("assistant", text), "assistant"))
    items += [
        block(
            {
                "type": "function_call",
                "call_id": c.id,
                "name": c.name,
                "arguments": c.arguments_json or "{}",
            },
            "function_call",
        )
        for c in event.tool_calls
    ]
    return items


def _user(event: Event) -> list[Block]:
    parts = [p for p in event.parts if p.data or p.uri]
    if not parts:
        return [block(_message("user", event.text), "user")] if event.text else []
    content: list[JsonObject] = [{"type": "input_text", "text": event.text}] if event.text else []
    content += [_content_part(p, i) for i, p in enumerate(parts)]
    return [block(_message("user", content), "user")]


def _content_part(part: Part, index: int) -> JsonObject:
    mime = media_type(part)
    if mime in OPENAI_IMAGES:
        return {"type": "input_image", "detail": "auto", "image_url": part.uri or data_url(part)}
    if mime in _FILES or mime.startswith("text/"):
        if part.uri:
            return {"type": "input_file", "file_url": part.uri}
        return {
            "type": "input_file",
            "file_data": data_url(part),
            "filename": filename(part, index),
        }
    text = f"{part_placeholder(part)} {part.uri}" if part.uri else part_placeholder(part)
    return {"type": "input_text", "text": text}


def _ends_with_reasoning(message: Message) -> bool:
    """Whether what follows decides if the message's last items are sent."""
    return message[1][-1].blocks[-1].kind == "reasoning"


def _followed_reasoning(said: Sequence[Message], start: int, opens: bool) -> incremental.Pieces:
    """A piece per message, without the reasoning items that no assistant item follows.

    Within an assistant event's chunk every reasoning item is followed by
    its message or calls; only a chunk that ends with reasoning (an event of
    reasoning alone) depends on what comes next: after the pieces laid out
    here, nothing.
    """
    starts: list[int] = []
    pieces: list[str] = []
    follower = ""  # the kind of the next item kept, walking backwards
    for k in range(len(said) - 1, -1, -1):
        kept: list[Chunk] = []
        for item in reversed(said[k][1]):
            if item.blocks[-1].kind == "reasoning" and follower not in _FOLLOWS_REASONING:
                blocks = list(item.blocks)
                while blocks and blocks[-1].kind == "reasoning":
                    blocks.pop()
                if not blocks:
                    continue
                item = chunk(blocks)
            kept.append(item)
            follower = item.blocks[0].kind
        if kept:
            kept.reverse()
            starts.append(start + k)
            pieces.append(",".join([c.json for c in kept]))
    starts.reverse()
    pieces.reverse()
    return starts, pieces


_LAYOUT = incremental.Layout(
    ("openai_responses", "assistant", "user"),
    _assistant,
    _user,
    _output,
    _orphan,
    _followed_reasoning,
    _frame,
    _ends_with_reasoning,
)
