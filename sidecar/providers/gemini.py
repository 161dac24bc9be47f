"""The window as a Gemini ``generateContent`` request: ``systemInstruction`` and ``contents``.

Roles are ``user`` and ``model``; a call is a ``functionCall`` part (its
signature, ``ToolCall.signature``, as that part's ``thoughtSignature``) and
its answer a ``functionResponse`` part in the ``user`` content right after.
A reasoning block with text is a ``{"text", "thought": true}`` part with its
signature. One with a signature but no text is either the signature Gemini
put on the turn's text part (the last such block: thoughts come before the
text) or a thought whose text a clearing took: the last goes back on the text
part (``"text": ""`` when the event has none), an earlier one stays where its
thought was, on a part with empty text, as the ADK adapter maps them. Redacted blocks are
Anthropic's and are not sent. Contents of one role in a row are merged,
since Gemini wants the roles to alternate, and a user content opens the
conversation. Bytes are standard base64, as Gemini's JSON takes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sidecar.model import Event, Part, ToolResult
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
    dumps,
    object_of,
)


def render_json(events: Sequence[Event], fragments: Fragments = NOTHING_KEPT) -> str:
    """``{"systemInstruction"?: ..., "contents": [...]}`` for the window ``events``, as JSON."""
    return incremental.render(events, fragments, _LAYOUT)


def _content(role: str, parts: list[Chunk]) -> str:
    return f'{{"role":"{role}","parts":{array(parts)}}}'


def _frame(system: str, contents: str) -> str:
    head = ""
    if system:
        head = f'"systemInstruction":{dumps({"parts": [{"text": system}]})},'
    return f'{{{head}"contents":[{contents}]}}'


def _media(part: Part) -> JsonObject:
    if part.uri:
        return {"fileData": {"mimeType": part.mime_type, "fileUri": part.uri}}
    return {"inlineData": {"mimeType": part.mime_type, "data": b64(part.data)}}


def _user_parts(event: Event) -> list[Block]:
    parts: list[JsonObject] = [{"text": event.text}] if event.text else []
    parts += [_media(p) for p in event.parts if p.data or p.uri]
    return [block(p) for p in parts]


def _model_parts(event: Event) -> list[Block]:
    """Thoughts, text, media, then calls: the order Gemini returns them in."""
    parts: list[JsonObject] = []
    signed = [
        i for i, r in enumerate(event.reasoning) if not r.text and not r.redacted and r.signature
    ]
    last = signed[-1] if signed else -1  # the text part's signature
    for i, reasoning in enumerate(event.reasoning):
        if reasoning.redacted or i == last:
            continue
        if reasoning.text:
            thought: JsonObject = {"text": reasoning.text, "thought": True}
            if reasoning.signature:
                thought["thoughtSignature"] = b64(reasoning.signature)
            parts.append(thought)
        elif reasoning.signature:
            parts.append({"text": "", "thoughtSignature": b64(reasoning.signature)})
    if event.text or last >= 0:
        text: JsonObject = {"text": event.text}
        if last >= 0:
            text["thoughtSignature"] = b64(event.reasoning[last].signature)
        parts.append(text)
    parts += [_media(p) for p in event.parts if p.data or p.uri]
    for call in event.tool_calls:
        part: JsonObject = {
            "functionCall": {
                "id": call.id,
                "name": call.name,
                "args": object_of(call.arguments_json),
            }
        }
        if call.signature:
            part["thoughtSignature"] = b64(call.signature)
        parts.append(part)
    return [block(p) for p in parts]


def _response(answer: Answer) -> list[Block]:
    """A ``functionResponse``: content that is a JSON object as itself (what the ADK
    adapter stores), other content as ``{"result": ...}`` or, an error, ``{"error": ...}``."""
    content = answer.content
    response: object = None
    if content.startswith("{"):
        try:
            response = json.loads(content)
        except ValueError:
            response = None
    if not isinstance(response, dict):
        response = {"error": content} if answer.is_error else {"result": content}
    call = answer.call
    return [block({"functionResponse": {"id": call.id, "name": call.name, "response": response}})]


def _orphan(result: ToolResult) -> list[Block]:
    return [block({"text": orphan_text(result)})]


_LAYOUT = incremental.Layout(
    ("gemini", "model", "user"),
    _model_parts,
    _user_parts,
    _response,
    _orphan,
    incremental.merged(_content, "user", block({"text": LEADING_USER_TEXT})),
    _frame,
)
