"""The window as a Gemini ``generateContent`` request: ``systemInstruction`` and ``contents``.

Roles are ``user`` and ``model``; a call is a ``functionCall`` part (its
signature, ``ToolCall.signature``, as that part's ``thoughtSignature``) and
its answer a ``functionResponse`` part in the ``user`` content right after.
A reasoning block with text is a ``{"text", "thought": true}`` part with its
signature; one with a signature but no text (Gemini signs the turn so, and
clearing leaves the signature) puts it on the event's text part, or on a
text-less part (``"text": ""``) when the event has none. Redacted blocks are
Anthropic's and are not sent. Contents of one role in a row are merged,
since Gemini wants the roles to alternate, and a user content opens the
conversation. Bytes are standard base64, as Gemini's JSON takes them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sidecar.model import Event, Part, ToolResult
from sidecar.providers.conversation import (
    LEADING_USER_TEXT,
    Answer,
    conversation,
    messages,
    orphan_text,
)
from sidecar.providers.fragments import NOTHING_KEPT, Fragments
from sidecar.providers.wire import (
    Block,
    JsonObject,
    alternating,
    array,
    b64,
    block,
    dumps,
    object_of,
)


def render_json(events: Sequence[Event], fragments: Fragments = NOTHING_KEPT) -> str:
    """``{"systemInstruction"?: ..., "contents": [...]}`` for the window ``events``, as JSON."""
    shaped = conversation(events)
    names = ("gemini", "model", "user")
    said = messages(shaped, names, fragments, _model_parts, _user_parts, _response, _orphan)
    lead = block({"text": LEADING_USER_TEXT})
    contents = ",".join(
        f'{{"role":"{role}","parts":{array(parts)}}}'
        for role, parts in alternating(said, "user", lead)
    )
    head = ""
    if shaped.system:
        head = f'"systemInstruction":{dumps({"parts": [{"text": shaped.system}]})},'
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
    unplaced: list[bytes] = []  # signatures of text-less reasoning, for the text part
    for reasoning in event.reasoning:
        if reasoning.redacted:
            continue
        if reasoning.text:
            thought: JsonObject = {"text": reasoning.text, "thought": True}
            if reasoning.signature:
                thought["thoughtSignature"] = b64(reasoning.signature)
            parts.append(thought)
        elif reasoning.signature:
            unplaced.append(reasoning.signature)
    if event.text:
        text: JsonObject = {"text": event.text}
        if unplaced:
            text["thoughtSignature"] = b64(unplaced.pop(0))
        parts.append(text)
    parts += [{"text": "", "thoughtSignature": b64(s)} for s in unplaced]
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
