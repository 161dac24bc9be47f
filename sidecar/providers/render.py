"""The window rendered in a provider's request format: the one entry point the servicer calls."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from enum import Enum

from sidecar.model import Event
from sidecar.providers import anthropic, gemini, openai_chat, openai_responses
from sidecar.providers.wire import JsonObject


class ContextFormat(Enum):
    """A provider's request format (the API's ``ContextFormat``)."""

    GEMINI = "gemini"
    OPENAI_CHAT = "openai_chat"
    OPENAI_RESPONSES = "openai_responses"
    ANTHROPIC = "anthropic"


_RENDERERS: dict[ContextFormat, Callable[[Sequence[Event]], JsonObject]] = {
    ContextFormat.GEMINI: gemini.render,
    ContextFormat.OPENAI_CHAT: openai_chat.render,
    ContextFormat.OPENAI_RESPONSES: openai_responses.render,
    ContextFormat.ANTHROPIC: anthropic.render,
}


def render(events: Sequence[Event], fmt: ContextFormat) -> JsonObject:
    """The request-body fields that carry the window ``events`` (log order) in ``fmt``."""
    return _RENDERERS[fmt](events)


def render_json(events: Sequence[Event], fmt: ContextFormat) -> str:
    """``render`` as compact JSON (no spaces, non-ASCII kept as is), ready to merge into a body."""
    return json.dumps(render(events, fmt), ensure_ascii=False, separators=(",", ":"))
