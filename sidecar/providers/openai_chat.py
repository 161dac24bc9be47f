"""The window as an OpenAI Chat Completions request: ``messages``.

The system text is a ``system`` message, first. An assistant message carries
its calls as ``tool_calls`` (type ``function``, arguments as the JSON
string they were), and each answer is a ``tool`` message with its
``tool_call_id``, right after it. Reasoning is not part of Chat Completions
input (the API neither takes it back nor returns it), so it is dropped.
User content takes the images OpenAI reads (PNG, JPEG, WebP, GIF:
``image_url``, the URI or the bytes as a data URL), WAV and MP3 audio
(``input_audio``) and inline PDFs (``file`` with a data URL), the only
file type Chat Completions takes; any other part (a URI that is not an
image's, a file of another type), and any part of an assistant message
(whose content is text only), is its placeholder text, e.g.
``[application/zip content]``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.model import Event, Part, ToolResult
from sidecar.providers import incremental
from sidecar.providers.conversation import Answer, orphan_text
from sidecar.providers.fragments import NOTHING_KEPT, Fragments
from sidecar.providers.wire import (
    OPENAI_IMAGES,
    Block,
    JsonObject,
    b64,
    block,
    data_url,
    dumps,
    filename,
    media_type,
    part_placeholder,
    text_with_placeholders,
)

_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def render_json(events: Sequence[Event], fragments: Fragments = NOTHING_KEPT) -> str:
    """``{"messages": [...]}`` for the window ``events``, as JSON."""
    return incremental.render(events, fragments, _LAYOUT)


def _frame(system: str, messages: str) -> str:
    if not system:
        return f'{{"messages":[{messages}]}}'
    first = dumps({"role": "system", "content": system})
    return f'{{"messages":[{first},{messages}]}}' if messages else f'{{"messages":[{first}]}}'


def _tool(answer: Answer) -> list[Block]:
    return [block({"role": "tool", "tool_call_id": answer.call.id, "content": answer.content})]


def _orphan(result: ToolResult) -> list[Block]:
    return [block({"role": "user", "content": orphan_text(result)})]


def _assistant(event: Event) -> list[Block]:
    message: JsonObject = {"role": "assistant"}
    text = text_with_placeholders(event)
    if text:
        message["content"] = text
    if event.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json or "{}"},
            }
            for c in event.tool_calls
        ]
    return [block(message)] if len(message) > 1 else []


def _user(event: Event) -> list[Block]:
    parts = [p for p in event.parts if p.data or p.uri]
    if not parts:
        return [block({"role": "user", "content": event.text})] if event.text else []
    content: list[JsonObject] = [{"type": "text", "text": event.text}] if event.text else []
    content += [_content_part(p, i) for i, p in enumerate(parts)]
    return [block({"role": "user", "content": content})]


def _content_part(part: Part, index: int) -> JsonObject:
    mime = media_type(part)
    if mime in OPENAI_IMAGES:
        return {"type": "image_url", "image_url": {"url": part.uri or data_url(part)}}
    if part.uri:
        return {"type": "text", "text": f"{part_placeholder(part)} {part.uri}"}
    audio = _AUDIO.get(mime)
    if audio is not None:
        return {"type": "input_audio", "input_audio": {"data": b64(part.data), "format": audio}}
    if mime == "application/pdf":
        return {
            "type": "file",
            "file": {"file_data": data_url(part), "filename": filename(part, index)},
        }
    return {"type": "text", "text": part_placeholder(part)}


_LAYOUT = incremental.Layout(
    ("openai_chat", "assistant", "user"),
    _assistant,
    _user,
    _tool,
    _orphan,
    incremental.flat,
    _frame,
)
