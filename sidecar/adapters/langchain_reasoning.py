"""A LangChain ``AIMessage``'s reasoning and signatures, as the providers' integrations put them.

Where they live on the message:

- Anthropic's (and Google GenAI's) content blocks ``{"type": "thinking",
  "thinking", "signature"}`` and ``{"type": "redacted_thinking", "data"}``;
- LangChain v1 standard blocks ``{"type": "reasoning", "reasoning", "id",
  "extras": {"signature" | "encrypted_content"}}``;
- OpenAI Responses reasoning items ``{"type": "reasoning", "id": "rs_...",
  "summary": [{"type": "summary_text", "text"}], "encrypted_content"}``, in
  the content (``responses/v1``) or in ``additional_kwargs["reasoning"]``;
- Google GenAI's function-call signatures, base64 by call id, in
  ``additional_kwargs["__gemini_function_call_thought_signatures__"]``.

Each reasoning block is a ``Reasoning`` in message order (the
``additional_kwargs`` item first, where OpenAI's translator puts it); a
function-call signature is its ``ToolCall.signature``. Signatures are kept as
the provider's bytes: Gemini's base64 decoded, the others' opaque strings as
UTF-8 (as ADK maps Anthropic's). The message's own form comes back from
``restored``: a list content (its text blocks' text only once, in the event's
text) and those ``additional_kwargs`` are kept in the event's metadata, and
``with_reasoning`` shows reasoning text a clearing changed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage

from sidecar.engine.validation import MAX_REASONING_ID_CHARS
from sidecar.model import Event, Reasoning
from sidecar.providers.wire import PROVIDER_KEY

META_CONTENT = "lc.content"  # a list content, verbatim JSON (when its shape cannot say it)
META_SHAPE = "lc.content_shape"  # a list content, its text blocks' text left to the event's text
META_KWARGS = "lc.additional_kwargs"  # the reasoning and signature entries, verbatim JSON

KWARG_REASONING = "reasoning"
KWARG_CALL_SIGNATURES = "__gemini_function_call_thought_signatures__"
_KWARGS = (KWARG_REASONING, KWARG_CALL_SIGNATURES)
_GEMINI_PROVIDERS = frozenset({"google_genai", "google_vertexai"})
_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "azure_openai": "openai"}


def _b64(text: str) -> bytes:
    """Gemini's signature bytes from LangChain's base64 (the text itself when not base64)."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode()


def _signature(value: object, gemini: bool) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    return _b64(value) if gemini else value.encode()


def _summary_text(block: Mapping[str, Any]) -> str:
    summary = block.get("summary") or []
    return "\n\n".join(str(s.get("text", "")) for s in summary if isinstance(s, Mapping))


def _provider_id(block: Mapping[str, Any]) -> str:
    """A block's id when the provider gave it (LangChain's own are ``lc_``-prefixed).

    One past the service's bound is no provider's (OpenAI's are some 50 characters) and is
    left out: the message's own form, which the model is given, keeps it (``verbatim``).
    """
    value = block.get("id")
    if not isinstance(value, str) or value.startswith("lc_"):
        return ""
    return value if len(value) <= MAX_REASONING_ID_CHARS else ""


def _block_reasoning(block: Mapping[str, Any], gemini: bool) -> Reasoning | None:
    """The reasoning a content block holds; None for a block of any other kind."""
    kind = block.get("type")
    if kind == "thinking":
        return Reasoning(str(block.get("thinking", "")), _signature(block.get("signature"), gemini))
    if kind == "redacted_thinking":
        return Reasoning(signature=_signature(block.get("data"), gemini), redacted=True)
    if kind != "reasoning":
        return None
    if "summary" in block or "encrypted_content" in block:  # an OpenAI Responses item
        return Reasoning(
            _summary_text(block),
            _signature(block.get("encrypted_content"), gemini),
            id=_provider_id(block),
        )
    extras = block.get("extras") or {}
    signature = extras.get("signature") or extras.get("encrypted_content")
    return Reasoning(
        str(block.get("reasoning", "")), _signature(signature, gemini), id=_provider_id(block)
    )


def _blocks(message: AIMessage) -> Iterator[Mapping[str, Any]]:
    """The message's reasoning-bearing objects in order: the kwargs item, then the content."""
    item = message.additional_kwargs.get(KWARG_REASONING)
    if isinstance(item, Mapping):
        yield {"type": "reasoning", **item}
    if isinstance(message.content, list):
        for block in message.content:
            if isinstance(block, Mapping):
                yield block


def reasoning_of(message: AIMessage) -> tuple[Reasoning, ...]:
    """The message's reasoning blocks, in order."""
    gemini = message.response_metadata.get("model_provider") in _GEMINI_PROVIDERS
    found = (_block_reasoning(b, gemini) for b in _blocks(message))
    return tuple(r for r in found if r is not None)


def call_signatures(message: AIMessage) -> dict[str, bytes]:
    """Gemini's function-call signatures by call id."""
    signatures = message.additional_kwargs.get(KWARG_CALL_SIGNATURES)
    if not isinstance(signatures, Mapping):
        return {}
    return {str(k): _b64(v) for k, v in signatures.items() if isinstance(v, str) and v}


def provenance(message: AIMessage) -> dict[str, str]:
    """``reasoning.provider`` for a message with reasoning whose integration says who wrote
    it (``response_metadata["model_provider"]``), so the renderings send its signatures
    to that provider only."""
    provider = message.response_metadata.get("model_provider")
    name = "gemini" if provider in _GEMINI_PROVIDERS else _PROVIDERS.get(str(provider), "")
    return {PROVIDER_KEY: name} if name and reasoning_of(message) else {}


def verbatim(message: AIMessage) -> dict[str, str]:
    """The metadata that gives the message's own form back: its list content, its kwargs."""
    metadata: dict[str, str] = {}
    if isinstance(message.content, list):
        shape = _shape(message.content)
        if shape is None:
            metadata[META_CONTENT] = json.dumps(message.content, ensure_ascii=False)
        else:
            metadata[META_SHAPE] = json.dumps(shape, ensure_ascii=False)
    kwargs = {k: message.additional_kwargs[k] for k in _KWARGS if k in message.additional_kwargs}
    if kwargs:
        metadata[META_KWARGS] = json.dumps(kwargs, ensure_ascii=False)
    return metadata


def restored(event: Event) -> tuple[str | list[str | dict[Any, Any]], dict[str, Any]]:
    """The content and ``additional_kwargs`` of the message ``event`` was made from."""
    raw = event.metadata.get(META_CONTENT)
    shape = event.metadata.get(META_SHAPE)
    content: str | list[str | dict[Any, Any]] = event.text
    if raw is not None:
        content = json.loads(raw)
    elif shape is not None:
        filled = _filled(json.loads(shape), event.text)
        if filled is not None:
            content = filled
    kwargs_raw = event.metadata.get(META_KWARGS)
    kwargs: dict[str, Any] = json.loads(kwargs_raw) if kwargs_raw is not None else {}
    return content, kwargs


def _shape(content: Sequence[object]) -> list[list[Any]] | None:
    """A list content with its text left out: the event's text holds it, in block order.

    Each item is ``["s", n]`` (a string block of n characters), ``["t", n,
    block]`` (a text block, its ``text`` None in its place) or ``["b",
    block]`` (any other block, verbatim). The text blocks are exactly what
    the event's text joins, so their texts are not stored twice. None when a
    text block's text is not a string: the content is then kept verbatim.
    """
    shape: list[list[Any]] = []
    for block in content:
        if isinstance(block, str):
            shape.append(["s", len(block)])
        elif isinstance(block, Mapping) and block.get("type") == "text" and "text" in block:
            text = block["text"]
            if not isinstance(text, str):
                return None
            without = {k: None if k == "text" else v for k, v in block.items()}
            shape.append(["t", len(text), without])
        else:
            shape.append(["b", block])
    return shape


def _filled(shape: Sequence[list[Any]], text: str) -> list[str | dict[Any, Any]] | None:
    """The list content ``shape`` describes, its texts cut from ``text``; None when they do
    not add up to it (then the text is all that can be given back)."""
    content: list[str | dict[Any, Any]] = []
    at = 0
    for item in shape:
        if item[0] == "s":
            content.append(text[at : at + item[1]])
            at += item[1]
        elif item[0] == "t":
            piece = text[at : at + item[1]]
            content.append({k: piece if k == "text" else v for k, v in item[2].items()})
            at += item[1]
        else:
            content.append(item[1])
    return content if at == len(text) else None


def _with_text(block: dict[str, Any], text: str) -> dict[str, Any]:
    """``block`` showing ``text`` in place of its reasoning text."""
    kind = block.get("type")
    if kind == "thinking":
        return {**block, "thinking": text}
    if "summary" in block or "encrypted_content" in block:
        return {**block, "summary": [{"type": "summary_text", "text": text}] if text else []}
    if kind == "reasoning":
        return {**block, "reasoning": text}
    return block  # redacted: there is no text to change


def with_reasoning(
    content: str | list[str | dict[Any, Any]],
    kwargs: Mapping[str, Any],
    reasoning: Sequence[Reasoning],
) -> tuple[str | list[str | dict[Any, Any]], dict[str, Any]]:
    """``content`` and ``kwargs`` showing ``reasoning``'s texts (a clearing's), block for block.

    A block whose text is unchanged is left as it is, so an event no
    clearing touched gives back its message exactly.
    """
    gemini = False  # only texts are compared and changed: how signatures decode is moot
    texts = iter([r.text for r in reasoning])
    out_kwargs = dict(kwargs)
    item = kwargs.get(KWARG_REASONING)
    if isinstance(item, Mapping):
        text = next(texts, None)
        found = _block_reasoning({"type": "reasoning", **item}, gemini)
        if text is not None and found is not None and found.text != text:
            out_kwargs[KWARG_REASONING] = _with_text(dict(item), text)
    if isinstance(content, str):
        return content, out_kwargs
    out: list[str | dict[Any, Any]] = []
    for block in content:
        found = _block_reasoning(block, gemini) if isinstance(block, dict) else None
        text = next(texts, None) if found is not None else None
        if isinstance(block, dict) and found is not None and text is not None:
            out.append(_with_text(block, text) if found.text != text else block)
        else:
            out.append(block)
    return out, out_kwargs
