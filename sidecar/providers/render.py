"""The window rendered in a provider's request format: the one entry point the servicer calls."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from enum import Enum

from sidecar.model import Event
from sidecar.providers import anthropic, gemini, openai_chat, openai_responses
from sidecar.providers.fragments import NOTHING_KEPT, Fragments
from sidecar.providers.wire import JsonObject


class ContextFormat(Enum):
    """A provider's request format (the API's ``ContextFormat``)."""

    GEMINI = "gemini"
    OPENAI_CHAT = "openai_chat"
    OPENAI_RESPONSES = "openai_responses"
    ANTHROPIC = "anthropic"


_RENDERERS: dict[ContextFormat, Callable[[Sequence[Event], Fragments], str]] = {
    ContextFormat.GEMINI: gemini.render_json,
    ContextFormat.OPENAI_CHAT: openai_chat.render_json,
    ContextFormat.OPENAI_RESPONSES: openai_responses.render_json,
    ContextFormat.ANTHROPIC: anthropic.render_json,
}


def render_json(
    events: Sequence[Event], fmt: ContextFormat, fragments: Fragments = NOTHING_KEPT
) -> str:
    """The request-body fields that carry the window ``events`` (log order) in ``fmt``, as
    compact JSON (non-ASCII kept as is), ready to merge into a request body.

    ``fragments`` keeps the encoded blocks of events for the next rendering.
    """
    return _RENDERERS[fmt](events, fragments)


def render(events: Sequence[Event], fmt: ContextFormat) -> JsonObject:
    """``render_json`` read back: the fields as a JSON object."""
    value = json.loads(render_json(events, fmt))
    assert isinstance(value, dict)
    return value
