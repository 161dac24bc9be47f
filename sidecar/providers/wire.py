"""What the renderings put on the wire: JSON objects, base64, data URLs and part placeholders."""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from sidecar import strict_json
from sidecar.compaction.formatting import part_placeholder
from sidecar.model import Event, Part, Reasoning

JsonObject: TypeAlias = dict[str, object]
"""A JSON object as the provider's request body has it, bound for ``json.dumps`` at once."""

__all__ = [
    "OPENAI_IMAGES",
    "Block",
    "Chunk",
    "JsonObject",
    "Message",
    "array",
    "b64",
    "block",
    "chunk",
    "data_url",
    "dumps",
    "filename",
    "media_type",
    "object_of",
    "origin",
    "parsed",
    "part_placeholder",
    "text_with_placeholders",
    "utf8",
]


@dataclass(frozen=True, slots=True)
class Block:
    """One rendered block (a part, a content block, a message, an input item) as JSON text.

    Renderings are assembled from blocks as text, so a block encoded once
    (see ``fragments``) is never encoded again. ``kind`` is what the
    assembly needs to know of it (its ``type``), or empty.
    """

    kind: str
    json: str


def dumps(value: object) -> str:
    """Compact JSON, non-ASCII kept as is: what every rendering is made of."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def block(value: JsonObject, kind: str = "") -> Block:
    return Block(kind, dumps(value))


@dataclass(frozen=True, slots=True)
class Chunk:
    """The blocks of one source (an event's own content, an answer, an orphan result) and
    their JSON joined: messages are assembled from chunks, a kept one never joined again."""

    blocks: tuple[Block, ...]
    json: str


def chunk(blocks: Iterable[Block]) -> Chunk:
    made = tuple(blocks)
    return Chunk(made, ",".join([b.json for b in made]))


def array(chunks: Sequence[Chunk]) -> str:
    """A JSON array of the blocks of ``chunks``."""
    if len(chunks) == 1:
        return f"[{chunks[0].json}]"
    return "[" + ",".join([c.json for c in chunks]) + "]"


def b64(data: bytes) -> str:
    """Standard base64 (RFC 4648, padded): what every provider takes for bytes."""
    return base64.b64encode(data).decode("ascii")


def data_url(part: Part) -> str:
    """``part``'s inline bytes as a ``data:`` URL, the form OpenAI takes inline files in."""
    return f"data:{part.mime_type};base64,{b64(part.data)}"


def text_with_placeholders(event: Event) -> str:
    """The event's text, then a placeholder per part (``[image/png content]``): for
    content that takes text only, as assistant messages do at OpenAI and Anthropic."""
    media = [part_placeholder(p) for p in event.parts if p.data or p.uri]
    if not media:
        return event.text
    return " ".join([event.text, *media]) if event.text else " ".join(media)


OPENAI_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
"""The image types OpenAI takes as images (both APIs): PNG, JPEG, WebP, GIF."""


def media_type(part: Part) -> str:
    """``part``'s MIME type without parameters, lower case (``text/csv; charset=utf-8``)."""
    return part.mime_type.split(";", 1)[0].strip().lower()


def filename(part: Part, index: int) -> str:
    """A name for the ``index``-th inline file of a message (OpenAI wants one with file data)."""
    return f"part-{index}{mimetypes.guess_extension(part.mime_type) or ''}"


def utf8(signature: bytes) -> str | None:
    """A signature that a provider gave as a string, as that string; None if it never was one.

    Anthropic's signatures and OpenAI's encrypted content are strings,
    stored as their UTF-8 bytes: bytes that are not UTF-8 came from another
    provider and cannot be sent to these.
    """
    try:
        return signature.decode("utf-8")
    except UnicodeDecodeError:
        return None


def parsed(text: str) -> tuple[bool, object]:
    """``(True, value)`` for text that is RFC 8259 JSON (see ``strict_json``), else
    ``(False, None)``: what a rendering parses, so that it is valid JSON itself."""
    try:
        return True, strict_json.parse(text)
    except strict_json.NotStrictJson:
        return False, None


def object_of(arguments_json: str) -> JsonObject:
    """A call's arguments as the JSON object Gemini and Anthropic take.

    Arguments are valid JSON (the server checks them); one that is not an
    object is wrapped as ``{"value": ...}``, and empty ones are ``{}``. Text
    that is not strict JSON (stored before the check was) is wrapped as it
    is, a string, rather than parsed into something no provider reads.
    """
    if not arguments_json:
        return {}
    ok, value = parsed(arguments_json)
    if not ok:
        return {"value": arguments_json}
    return value if isinstance(value, dict) else {"value": value}


PROVIDER_KEY = "reasoning.provider"
"""The event metadata key that names who wrote its reasoning: ``gemini``, ``anthropic``
or ``openai`` (the adapters set it; an agent may)."""

PROVIDERS = frozenset({"gemini", "anthropic", "openai"})


def origin(event: Event, block: Reasoning) -> str:
    """The provider that wrote ``block`` of ``event``, or ``""`` when nothing says.

    The event's ``reasoning.provider`` metadata when it names one; else the
    block's shape: only Gemini's signatures are bytes rather than the UTF-8
    of a string, only OpenAI gives a block an ``id``, and only Anthropic
    redacts one. A block none of these place is sent to every format
    that takes its shape.
    """
    named = event.metadata.get(PROVIDER_KEY, "") if event.metadata else ""
    if named in PROVIDERS:
        return named
    if block.signature and utf8(block.signature) is None:
        return "gemini"
    if block.id:
        return "openai"
    if block.redacted:
        return "anthropic"
    return ""


Message: TypeAlias = tuple[str, list[Chunk]]
"""A message being built: its role as the provider names it, and its parts or blocks."""
