"""Each rendering parsed into its provider's official SDK request types.

google-genai's pydantic models forbid unknown fields. OpenAI's and
Anthropic's request types are TypedDicts: validated with pydantic, which
ignores unknown keys and validates ``Iterable`` fields lazily, so the value
is walked to the end and must come back equal to the rendering: a key the
SDK does not know, or a block it read as another type, fails the check.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from google.genai import types
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import TypeAdapter

from sidecar.providers.render import ContextFormat
from sidecar.providers.wire import JsonObject


@cache
def _adapter(kind: type) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _walked(value: object) -> object:
    """``value`` with every lazily validated iterable read to the end (raising what it finds)."""
    if isinstance(value, dict):
        return {k: _walked(v) for k, v in value.items()}
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return value
    if isinstance(value, list | tuple) or hasattr(value, "__iter__"):
        return [_walked(v) for v in value]
    return value


def _typed_dict(kind: type, body: JsonObject) -> None:
    validated = _walked(_adapter(kind).validate_python(body))
    assert validated == body, "the SDK type dropped or changed something"


def gemini(body: JsonObject) -> tuple[types.GenerateContentConfig, list[types.Content]]:
    """The rendering as google-genai's config (its system instruction) and contents."""
    assert set(body) <= {"systemInstruction", "contents"}
    config = types.GenerateContentConfig.model_validate_json(
        json.dumps({"systemInstruction": body.get("systemInstruction")})
    )
    contents = body["contents"]
    assert isinstance(contents, list)
    return config, [types.Content.model_validate_json(json.dumps(c)) for c in contents]


def openai_chat(body: JsonObject) -> None:
    assert set(body) == {"messages"}
    _typed_dict(CompletionCreateParamsNonStreaming, {"model": "gpt-5", **body})


def openai_responses(body: JsonObject) -> None:
    assert set(body) <= {"instructions", "input"}
    _typed_dict(ResponseCreateParamsNonStreaming, {"model": "gpt-5", **body})


def anthropic(body: JsonObject) -> None:
    assert set(body) <= {"system", "messages"}
    messages = body["messages"]
    assert isinstance(messages, list)
    assert all(m["role"] in ("user", "assistant") for m in messages)
    _typed_dict(
        MessageCreateParamsNonStreaming, {"model": "claude-sonnet-4-5", "max_tokens": 1, **body}
    )


def parse(fmt: ContextFormat, body: JsonObject) -> None:
    """Fail unless ``body`` parses as ``fmt``'s SDK request types."""
    match fmt:
        case ContextFormat.GEMINI:
            gemini(body)
        case ContextFormat.OPENAI_CHAT:
            openai_chat(body)
        case ContextFormat.OPENAI_RESPONSES:
            openai_responses(body)
        case ContextFormat.ANTHROPIC:
            anthropic(body)
