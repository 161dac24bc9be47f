"""Google ADK: the session's stable prefix, for prompt caches and the agent's own callbacks.

ADK has no request field for a cache key. Its own context caching
(``App(context_cache_config=ContextCacheConfig(...))``) needs none: the
Gemini explicit cache is fingerprinted from the request's own leading
contents, so a compaction that rewrites them is a fingerprint mismatch and
the cache is rebuilt, and Claude (``AnthropicLlm``, LiteLLM) gets
breakpoints ADK itself places at the end of the tools, the system
instruction and the conversation. What ADK does pass on per request is
``llm_request.config.http_options.extra_body``, which ``LiteLlm`` merges
into the provider's request body: there OpenAI's ``prompt_cache_key`` fits.

``CompactionSessionService`` and ``CompactingModelCallback`` remember, per
session, the ``CachePrefix`` of the window they last handed ADK (the one
its next model call is built from), and ``cache_prefix_hints`` is the
``before_model_callback`` that passes it on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions.session import Session as AdkSession
from google.genai import types

from sidecar.client import SessionContext

STATE_CACHE_PREFIX_ID = "temp:compaction.cache_prefix_id"
STATE_STABLE_PREFIX_TOKENS = "temp:compaction.stable_prefix_tokens"
STATE_STABLE_PREFIX_EVENTS = "temp:compaction.stable_prefix_events"

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CachePrefix:
    """A window's cache prefix: ``cache_prefix_id`` is new exactly when the bytes a provider
    caches of its stable prefix change; its first ``stable_prefix_events`` events
    (``stable_prefix_tokens`` tokens) are what every window with that id starts with."""

    cache_prefix_id: str
    stable_prefix_tokens: int
    stable_prefix_events: int

    @classmethod
    def of(cls, context: SessionContext) -> CachePrefix:
        return cls(
            context.cache_prefix_id, context.stable_prefix_tokens, context.stable_prefix_events
        )


class PrefixSource(Protocol):
    """What knows the cache prefix of the window a session's next model call is built from."""

    def cache_prefix(self, session: AdkSession) -> CachePrefix | None: ...


ModelCallback = Callable[[CallbackContext, LlmRequest], Awaitable[LlmResponse | None]]


def cache_prefix_hints(source: PrefixSource, *, prompt_cache_key: bool = True) -> ModelCallback:
    """A ``before_model_callback`` passing ``source``'s cache prefix on for each call.

    The three values go to the invocation's temp state
    (``STATE_CACHE_PREFIX_ID``...: the agent's instructions, tools and other
    callbacks can read them; temp state is never stored). With
    ``prompt_cache_key``, the id is also OpenAI's ``prompt_cache_key`` in
    the request's ``extra_body``, which ``LiteLlm`` sends along — but not to
    a ``Gemini`` model, whose API would refuse the field. A key the request
    already has is kept. Never fails the call: a hint that cannot be added
    is left out. After ``CompactingModelCallback`` in the callback list when
    that is the source.
    """

    async def hint(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        prefix = source.cache_prefix(callback_context.session)
        if prefix is None:
            return None
        try:
            callback_context.state[STATE_CACHE_PREFIX_ID] = prefix.cache_prefix_id
            callback_context.state[STATE_STABLE_PREFIX_TOKENS] = prefix.stable_prefix_tokens
            callback_context.state[STATE_STABLE_PREFIX_EVENTS] = prefix.stable_prefix_events
            if prompt_cache_key and prefix.cache_prefix_id and not _is_gemini(callback_context):
                _set_prompt_cache_key(llm_request, prefix.cache_prefix_id)
        except Exception:  # a hint is an optimisation: the call must not fail for it
            _log.warning("prompt-cache hint left out", exc_info=True)
        return None

    return hint


def _is_gemini(callback_context: CallbackContext) -> bool:
    agent = callback_context._invocation_context.agent
    return isinstance(getattr(agent, "canonical_model", None), Gemini)


def _set_prompt_cache_key(llm_request: LlmRequest, key: str) -> None:
    config = llm_request.config
    if config.http_options is None:
        config.http_options = types.HttpOptions()
    body = dict(config.http_options.extra_body or {})
    body.setdefault("prompt_cache_key", key)
    config.http_options.extra_body = body
