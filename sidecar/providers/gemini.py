"""The window as a Gemini ``generateContent`` request: ``systemInstruction`` and ``contents``.

Roles are ``user`` and ``model``; a call is a ``functionCall`` part (its
signature, ``ToolCall.signature``, as that part's ``thoughtSignature``) and
its answers are ``functionResponse`` parts, in call order, in a ``user``
content of their own right after it: never in one with text or media
(a TOOL event's own text, a user message logged before a slow result),
which Gemini refuses. A reasoning block with text is a ``{"text",
"thought": true}`` part with its signature. One with a signature but no
text is either the signature Gemini put on the turn's text part (the last
such block: thoughts come before the text) or a thought whose text a
clearing took: the last goes back on the text part (``"text": ""`` when
the event has none), an earlier one stays where its thought was, on a part
with empty text, as the ADK adapter maps them. Redacted blocks, and blocks
another provider wrote (``wire.origin``), are not sent: Gemini checks the
signatures it is given.

Gemini 3 refuses a step of the current turn (from the last user content
that is not function responses) whose first ``functionCall`` has no
signature: a call another provider made, or one logged before signatures
were kept. That call carries ``SKIP_SIGNATURE``, the value Google documents
for exactly this; calls of earlier turns go as they are. Contents of one
role in a row are otherwise merged, and a user content opens the
conversation. Bytes are standard base64, as Gemini's JSON takes them; a
result that is not strict JSON is sent as its text, so the request is
always JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.model import Event, Part, ToolResult
from sidecar.providers import incremental
from sidecar.providers.conversation import LEADING_USER_TEXT, Answer, orphan_text
from sidecar.providers.fragments import NOTHING_KEPT, Fragments
from sidecar.providers.wire import (
    Block,
    Chunk,
    JsonObject,
    Message,
    array,
    b64,
    block,
    chunk,
    dumps,
    object_of,
    origin,
    parsed,
)

SKIP_SIGNATURE = b"skip_thought_signature_validator"
"""The thought signature Google documents for a function call Gemini did not sign
(https://ai.google.dev/gemini-api/docs/thought-signatures, FAQs); the one of its
two values that Vertex AI takes too."""

_CALL, _UNSIGNED_CALL, _RESPONSE = "call", "unsigned_call", "response"  # blocks' kinds
_SKIP = f',"thoughtSignature":"{b64(SKIP_SIGNATURE)}"}}'


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
    reasoning_sent = [
        r for r in event.reasoning if not r.redacted and origin(event, r) in ("", "gemini")
    ]
    signed = [i for i, r in enumerate(reasoning_sent) if not r.text and r.signature]
    last = signed[-1] if signed else -1  # the text part's signature
    for i, reasoning in enumerate(reasoning_sent):
        if i == last:
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
            text["thoughtSignature"] = b64(reasoning_sent[last].signature)
        parts.append(text)
    parts += [_media(p) for p in event.parts if p.data or p.uri]
    blocks = [block(p) for p in parts]
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
        blocks.append(block(part, _CALL if call.signature else _UNSIGNED_CALL))
    return blocks


def _response(answer: Answer) -> list[Block]:
    """A ``functionResponse``: content that is a JSON object as itself (what the ADK
    adapter stores), other content as ``{"result": ...}``; an error as ``{"error": ...}``
    (a JSON object too, unless it is one already)."""
    content = answer.content
    response: object = None
    if content.startswith("{"):
        _, response = parsed(content)
    if isinstance(response, dict):
        if answer.is_error and set(response) != {"error"}:
            response = {"error": response}
    else:
        response = {"error": content} if answer.is_error else {"result": content}
    call = answer.call
    value: JsonObject = {
        "functionResponse": {"id": call.id, "name": call.name, "response": response}
    }
    return [block(value, _RESPONSE)]


def _orphan(result: ToolResult) -> list[Block]:
    return [block({"text": orphan_text(result)})]


def _responses(message: Message) -> bool:
    """Whether ``message`` is function responses, which stand in a content of their own."""
    return message[1][0].blocks[0].kind == _RESPONSE


def _unsigned(message: Message) -> bool:
    """Whether ``message``'s first call has no signature (it gets one in the current turn)."""
    if message[0] != "model":
        return False
    for piece in message[1]:
        for b in piece.blocks:
            if b.kind in (_CALL, _UNSIGNED_CALL):
                return b.kind == _UNSIGNED_CALL
    return False


def _opens_turn(message: Message) -> bool:
    """Whether ``message`` starts a turn: user content that is not function responses."""
    return message[0] == "user" and not _responses(message)


def _signed(message: Message) -> Message:
    """``message`` with ``SKIP_SIGNATURE`` on its first call (which has no signature)."""
    out: list[Chunk] = []
    done = False
    for piece in message[1]:
        if not done and any(b.kind == _UNSIGNED_CALL for b in piece.blocks):
            blocks = list(piece.blocks)
            at = next(i for i, b in enumerate(blocks) if b.kind == _UNSIGNED_CALL)
            blocks[at] = Block(_CALL, blocks[at].json[:-1] + _SKIP)
            piece = chunk(blocks)
            done = True
        out.append(piece)
    return message[0], out


_merged = incremental.merged(_content, "user", block({"text": LEADING_USER_TEXT}), _responses)


def _lay(said: Sequence[Message], start: int, opens: bool) -> incremental.Pieces:
    """Contents as ``incremental.merged`` lays them, function responses alone, with
    ``SKIP_SIGNATURE`` on the unsigned first calls of the current turn's steps.

    The current turn is the messages after the last one that opens a turn;
    ``incremental`` lays out again every message from the first of those
    whose first call is unsigned, so ``said`` holds the whole of it.
    """
    turn = max((k for k, m in enumerate(said) if _opens_turn(m)), default=-1)
    if any(_unsigned(m) for m in said[turn + 1 :]):
        said = [_signed(m) if k > turn and _unsigned(m) else m for k, m in enumerate(said)]
    return _merged(said, start, opens)


_LAYOUT = incremental.Layout(
    ("gemini", "model", "user"),
    _model_parts,
    _user_parts,
    _response,
    _orphan,
    _lay,
    _frame,
    open_ended=_unsigned,
    settles=_opens_turn,
)
