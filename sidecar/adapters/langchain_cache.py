"""Prompt-cache hints for LangChain model calls, from the session's stable prefix.

The window GetContext returns carries ``cache_prefix_id`` (new exactly when
the bytes a provider caches of its stable prefix change) and ``stable_prefix_events`` (the events
every window with that id starts with). The providers that take a hint take
it in two forms:

- OpenAI: ``prompt_cache_key``, a request parameter (a ``model_settings``
  entry: the agent binds it to the model). The id routes the session's calls
  to the machines holding its prefix, and moves to new ones exactly when a
  compaction rewrote that prefix.
- Anthropic: a ``cache_control`` breakpoint on a content block. Put on the
  stable prefix's last message it stays where it is until the next
  compaction, so every call in between reads that prefix from the cache —
  beside the breakpoint ``AnthropicPromptCachingMiddleware`` moves to the
  end of each request. Below the provider's minimum (1,024 tokens on most
  models) a breakpoint caches nothing, so none is placed.

A hint never changes what the model is told: it is added to a copy of the
request, or, when it cannot be, left out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, AnyMessage

from sidecar.client import SessionContext

CacheHints = Literal["auto", "openai", "anthropic"]

ANTHROPIC_MIN_TOKENS = 1024
EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}

# Claude refuses a breakpoint on a reasoning block.
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
_log = logging.getLogger(__name__)


def provider_of(model: object, hints: CacheHints) -> Literal["openai", "anthropic"] | None:
    """Which provider's hint the call takes: the one named, or (``auto``) the model's own,
    told by its class's module (``langchain_openai``, ``langchain_anthropic``) so neither
    package need be installed."""
    if hints != "auto":
        return hints
    module = type(model).__module__
    if module.startswith("langchain_openai"):
        return "openai"
    if module.startswith("langchain_anthropic"):
        return "anthropic"
    return None


def with_cache_hints(
    request: ModelRequest[Any],
    context: SessionContext,
    prefix_end: int | None,
    hints: CacheHints,
    *,
    min_tokens: int = ANTHROPIC_MIN_TOKENS,
    cache_control: Mapping[str, Any] = EPHEMERAL,
) -> ModelRequest[Any]:
    """``request`` with the hint its provider takes; ``request`` itself when there is none.

    ``prefix_end`` is the index in ``request.messages`` of the stable
    prefix's last message (None: the prefix is empty or not among them). A
    key or breakpoint the caller already set is kept. Never raises: a hint
    that cannot be added is left out, and the call goes on without it.
    """
    try:
        provider = provider_of(request.model, hints)
        if provider == "openai" and context.cache_prefix_id:
            if "prompt_cache_key" in request.model_settings:
                return request
            settings = {**request.model_settings, "prompt_cache_key": context.cache_prefix_id}
            return request.override(model_settings=settings)
        if provider == "anthropic" and prefix_end is not None:
            if context.stable_prefix_tokens < min_tokens:
                return request
            messages = with_breakpoint(request.messages, prefix_end, cache_control)
            return request if messages is None else request.override(messages=messages)
    except Exception:  # a hint is an optimisation: the call must not fail for it
        _log.warning("prompt-cache hint left out", exc_info=True)
    return request


def with_breakpoint(
    messages: Sequence[AnyMessage], end: int, cache_control: Mapping[str, Any]
) -> list[AnyMessage] | None:
    """The messages with ``cache_control`` on the last block of ``messages[end]``, or of the
    nearest earlier message that has a block to carry it (an earlier breakpoint still lies
    inside the stable prefix; a later one would not). None when no message can, or one
    already carries a breakpoint. The messages are copies: the graph's state is untouched."""
    if any(_has_breakpoint(m) for m in messages):
        return None
    for index in range(min(end, len(messages) - 1), -1, -1):
        content = _marked(messages[index], cache_control)
        if content is not None:
            out = list(messages)
            out[index] = messages[index].model_copy(update={"content": content})
            return out
    return None


def _marked(message: AnyMessage, cache_control: Mapping[str, Any]) -> list[Any] | None:
    """The message's content as blocks, the last markable one carrying ``cache_control``;
    None when it has no block that can (empty text: a tool call's answer is its tool_calls,
    which ChatAnthropic renders after the content, so the mark goes to an earlier message)."""
    if isinstance(message.content, str):
        if not message.content:
            return None
        return [{"type": "text", "text": message.content, "cache_control": dict(cache_control)}]
    blocks: list[Any] = list(message.content)
    for i in range(len(blocks) - 1, -1, -1):
        block = blocks[i]
        if isinstance(block, str):
            if block:
                blocks[i] = {"type": "text", "text": block, "cache_control": dict(cache_control)}
                return blocks
            continue
        kind = block.get("type")
        if kind in _UNMARKABLE or (kind == "text" and not block.get("text")):
            continue
        if isinstance(message, AIMessage) and kind == "tool_use" and message.tool_calls:
            continue  # ChatAnthropic rebuilds tool_use blocks from tool_calls
        blocks[i] = {**block, "cache_control": dict(cache_control)}
        return blocks
    return None


def _has_breakpoint(message: AnyMessage) -> bool:
    return not isinstance(message.content, str) and any(
        isinstance(b, Mapping) and "cache_control" in b for b in message.content
    )
