"""LangChain v1 agents on the compaction sidecar: an ``AgentMiddleware``.

``SessionCompactionMiddleware`` mirrors the agent state's messages into a
session before each model call (``before_model`` / ``abefore_model``,
idempotent by message id), and hands the model the session's compacted
context instead of the whole history (``wrap_model_call``). Unlike
LangChain's ``SummarizationMiddleware`` it never removes messages from the
graph's state — the checkpointed history stays whole, and so does the
service's log — and the service never keeps a tool result without the call
that requested it: compaction never makes an orphaned ``ToolMessage``. A
``ToolMessage`` already orphaned in the state (no call before it is waiting
for it), which every provider refuses, reaches the model as the server's
renderings give it (``orphan_text``: user text that says what it is); the
state and the log keep it as it is. The system
prompt is the agent's own, sent first as always; the summary is a
user/assistant pair after it; a ``SystemMessage`` in the state stays where
it stands (the latest is never archived).

Each model call's prompt tokens, as its provider reported them
(``AIMessage.usage_metadata["input_tokens"]``), are stored with the
``AIMessage`` they came on, for the version of the window the call was
given: the session's token estimates are calibrated by them. The run's
last messages are mirrored when it ends (``after_agent``), so its last
call is reported too.

With ``cache_hints`` the call also carries the window's stable prefix to
the provider's prompt cache: OpenAI's ``prompt_cache_key``, or an Anthropic
``cache_control`` breakpoint (``langchain_cache``).

``clear_tool_uses_policy`` is LangChain's ``ContextEditingMiddleware(
ClearToolUsesEdit(...))`` as a session policy, optionally followed by a
summary, the way ``SummarizationMiddleware`` would run after it
(``langchain_policy``). How messages map to events and a window back to the
model's messages is ``langchain_mapping``; both are importable from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.config import get_config
from langgraph.runtime import Runtime

from sidecar.adapters.clients import BARRIER, fitted_key
from sidecar.adapters.langchain_cache import ANTHROPIC_MIN_TOKENS, CacheHints, with_cache_hints
from sidecar.adapters.langchain_mapping import (
    cleared_message,
    compacted_messages,
    ensure_ids,
    event_id,
    event_to_message,
    message_to_event,
    prefix_end,
    without_orphans,
)
from sidecar.adapters.langchain_policy import (
    clear_tool_uses_policy,
    policy_from_clear_tool_uses_edit,
)
from sidecar.adapters.usage import Recent, append_reporting, append_reporting_sync, model_usage
from sidecar.client import AlreadyExistsError, AsyncClient, Client, ModelUsage, SessionContext
from sidecar.compaction.policy import CompactionPolicy
from sidecar.model import Event

__all__ = [
    "SessionCompactionMiddleware",
    "SessionIdFn",
    "clear_tool_uses_policy",
    "cleared_message",
    "compacted_messages",
    "ensure_ids",
    "event_id",
    "event_to_message",
    "message_to_event",
    "policy_from_clear_tool_uses_edit",
    "prefix_end",
    "without_orphans",
]

_SAFE_ID = re.compile(r"[^A-Za-z0-9._~@+=-]")
_APPEND_BATCH = 500

SessionIdFn = Callable[[Runtime[Any]], str]


def _escaped(found: re.Match[str]) -> str:
    """An unsafe character as ``:XX`` (up to U+00FF) or ``:_XXXXXX``: fixed widths, so no
    two ids escape alike (``:3A00`` was both ``:00`` and U+3A00)."""
    code = ord(found.group())
    return f":{code:02X}" if code < 0x100 else f":_{code:06X}"


def _thread_session_id(messages: Sequence[AnyMessage]) -> str:
    """The default session id: the graph run's ``thread_id``.

    A run without one (no checkpointer: its state is its whole conversation, as
    ``SummarizationMiddleware`` sees it) is named by its first message's id, which
    the graph gives the message and keeps for the run, so each such run is a
    session of its own.
    """
    thread = get_config().get("configurable", {}).get("thread_id")
    if thread is not None:
        return str(thread)
    if not messages:
        raise ValueError("no thread_id in the run's config and no messages: pass session_id=")
    ensure_ids(messages[:1])
    return f"run-{event_id(messages[0])}"


def _state_messages(request: ModelRequest[Any]) -> Sequence[AnyMessage]:
    """The run's state's messages, as the hooks got them (``request.messages`` may be another
    middleware's override)."""
    state = request.state or {}
    messages: Sequence[AnyMessage] = state.get("messages") or request.messages
    return messages


class SessionCompactionMiddleware(AgentMiddleware):
    """Mirror the agent's messages into a session; give the model the compacted context.

    ``target``: an address, a ``Client`` (sync agents) or an ``AsyncClient``
    (async agents). ``session_id``: a fixed id, a function of the runtime, or
    (default) the run's ``thread_id`` (a run without one: its first message's
    id, so each run is a session of its own); the service's id is
    ``<namespace>/<id>`` (hashed past the service's 128 characters). New sessions
    get ``policy`` (None: the server's default). With ``await_compaction`` a
    mirror that started a background summary waits for it, so this very call
    sees it (and the mirror at the run's end, so the next run's first call does).

    ``cache_hints`` passes the window's stable prefix on to the provider's
    prompt cache (``langchain_cache``): ``"openai"`` sets ``prompt_cache_key``
    to the window's ``cache_prefix_id``; ``"anthropic"`` puts a
    ``cache_control`` breakpoint on the stable prefix's last message once it
    holds ``cache_min_tokens``; ``"auto"`` picks by the model's package
    (``langchain_openai``, ``langchain_anthropic``); None (the default) adds
    nothing.
    """

    def __init__(
        self,
        target: str | Client | AsyncClient,
        *,
        policy: CompactionPolicy | None = None,
        session_id: str | SessionIdFn | None = None,
        namespace: str = "langchain",
        await_compaction: bool = False,
        cache_hints: CacheHints | None = None,
        cache_min_tokens: int = ANTHROPIC_MIN_TOKENS,
        **client_options: Any,
    ) -> None:
        super().__init__()
        self._address = target if isinstance(target, str) else ""
        self._sync = target if isinstance(target, Client) else None
        self._async = target if isinstance(target, AsyncClient) else None
        self._options = client_options
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self.policy = policy
        self.session_id = session_id
        self.namespace = namespace
        self.await_compaction = await_compaction
        self.cache_hints = cache_hints
        self.cache_min_tokens = cache_min_tokens
        # Per session, the ids mirrored and the window read for the next call: the most
        # recent sessions only. A session forgotten sends its events again, which stores
        # nothing twice (an append is idempotent).
        self._sent: Recent[set[str]] = Recent()
        self._windows: Recent[SessionContext] = Recent()
        # Per session: the last call's answer (its event id) and the usage to store with it.
        self._answers: Recent[tuple[str, ModelUsage]] = Recent()

    # -- clients and keys --

    def sync_client(self) -> Client:
        """The ``Client`` sync agents' calls use: the one given, else one made on first use."""
        if self._sync is None:
            if not self._address:
                raise TypeError("a sync agent needs a Client or an address, not an AsyncClient")
            self._sync = Client(self._address, **self._options)
        return self._sync

    def async_client(self) -> AsyncClient:
        """The ``AsyncClient`` async agents' calls use: the one given, else one per event loop."""
        if self._async is not None:
            return self._async
        if not self._address:
            raise TypeError("an async agent needs an AsyncClient or an address, not a Client")
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is None:  # a grpc.aio channel belongs to the loop that made it
            client = self._by_loop[loop] = AsyncClient(self._address, **self._options)
        return client

    def key(self, runtime: Runtime[Any], messages: Sequence[AnyMessage] = ()) -> str:
        """The service's session id for this run (``messages``: the run's state's, which name
        a run that has no ``thread_id``)."""
        if isinstance(self.session_id, str):
            raw = self.session_id
        elif self.session_id is not None:
            raw = self.session_id(runtime)
        else:
            raw = _thread_session_id(messages)
        return fitted_key(f"{self.namespace}/{_SAFE_ID.sub(_escaped, raw)}")

    def _new_events(self, sent: set[str], messages: Sequence[AnyMessage]) -> list[Event]:
        ensure_ids(messages)
        events = [e for m in messages if (e := message_to_event(m)) is not None]
        return [e for e in events if e.id not in sent]

    def _remember(self, key: str) -> set[str]:
        """A new set of the ids mirrored to the session (never mirrored, or forgotten)."""
        sent: set[str] = set()
        self._sent.set(key, sent)
        return sent

    # -- mirroring --

    def _mirror(self, key: str, messages: Sequence[AnyMessage]) -> None:
        """Append the messages not sent yet, the last call's answer with its usage; with
        ``await_compaction``, wait for a summary the appends started."""
        client = self.sync_client()
        sent = self._sent.get(key)
        if sent is None:
            with contextlib.suppress(AlreadyExistsError):
                client.create_session(key, self.policy, {"adapter": "langchain"})
            sent = self._remember(key)
        handle = client.session(key)
        new = self._new_events(sent, messages)
        answer = self._answers.pop(key)
        scheduled = False
        for start in range(0, len(new), _APPEND_BATCH):
            batch = new[start : start + _APPEND_BATCH]
            try:
                appended = append_reporting_sync(
                    handle, batch, _usage_for(batch, answer), stand_ins=True
                )
                scheduled = appended.compaction_scheduled or scheduled
            except AlreadyExistsError:  # a message edited in place: store the rest
                for event in batch:
                    with contextlib.suppress(AlreadyExistsError):
                        appended = append_reporting_sync(
                            handle, [event], _usage_for([event], answer), stand_ins=True
                        )
                        scheduled = appended.compaction_scheduled or scheduled
            sent.update(e.id for e in batch)
        if self.await_compaction and scheduled:
            handle.compact(BARRIER)

    async def _amirror(self, key: str, messages: Sequence[AnyMessage]) -> None:
        """``_mirror`` for async agents."""
        client = self.async_client()
        sent = self._sent.get(key)
        if sent is None:
            with contextlib.suppress(AlreadyExistsError):
                await client.create_session(key, self.policy, {"adapter": "langchain"})
            sent = self._remember(key)
        handle = client.session(key)
        new = self._new_events(sent, messages)
        answer = self._answers.pop(key)
        scheduled = False
        for start in range(0, len(new), _APPEND_BATCH):
            batch = new[start : start + _APPEND_BATCH]
            try:
                appended = await append_reporting(
                    handle, batch, _usage_for(batch, answer), stand_ins=True
                )
                scheduled = appended.compaction_scheduled or scheduled
            except AlreadyExistsError:  # a message edited in place: store the rest
                for event in batch:
                    with contextlib.suppress(AlreadyExistsError):
                        appended = await append_reporting(
                            handle, [event], _usage_for([event], answer), stand_ins=True
                        )
                        scheduled = appended.compaction_scheduled or scheduled
            sent.update(e.id for e in batch)
        if self.await_compaction and scheduled:
            await handle.compact(BARRIER)

    # -- the hooks --

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Mirror the new messages, read the compacted window; never changes the state."""
        key = self.key(runtime, state["messages"])
        self._mirror(key, state["messages"])
        self._windows.set(key, self.sync_client().session(key).context())
        return None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``before_model`` for async agents."""
        key = self.key(runtime, state["messages"])
        await self._amirror(key, state["messages"])
        self._windows.set(key, await self.async_client().session(key).context())
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Mirror the run's last messages (its last call's answer, with its usage)."""
        self._mirror(self.key(runtime, state["messages"]), state["messages"])
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``after_agent`` for async agents."""
        await self._amirror(self.key(runtime, state["messages"]), state["messages"])
        return None

    def _compacted(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], int | None]:
        """The request with the compacted messages (and the cache hint, with ``cache_hints``),
        and the version of the window they are."""
        key = self.key(request.runtime, _state_messages(request))
        context = self._windows.pop(key)
        if context is None:  # before_model did not run for this call: orphans aside, as it is
            answered = without_orphans(request.messages)
            if answered != list(request.messages):
                request = request.override(messages=answered)
            return request, None
        messages = compacted_messages(
            context.events, request.messages, self._sent.get(key) or set()
        )
        compacted = request.override(messages=messages)
        if self.cache_hints is not None:
            compacted = with_cache_hints(
                compacted,
                context,
                prefix_end(context, messages),
                self.cache_hints,
                min_tokens=self.cache_min_tokens,
            )
        return compacted, context.version

    def _answered(self, request: ModelRequest[Any], version: int | None, result: object) -> None:
        """Keep the usage the model's answer reports, to store with that answer."""
        message = _answer(result)
        if version is None or message is None or message.usage_metadata is None:
            return
        usage = model_usage(version, message.usage_metadata.get("input_tokens"))
        if usage is None:
            return
        ensure_ids([message])  # the id it will be mirrored under
        self._answers.set(
            self.key(request.runtime, _state_messages(request)), (event_id(message), usage)
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Call the model with the compacted messages; the state keeps every message."""
        compacted, version = self._compacted(request)
        result = handler(compacted)
        self._answered(request, version, result)
        return result

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        compacted, version = self._compacted(request)
        result = await handler(compacted)
        self._answered(request, version, result)
        return result


def _answer(result: object) -> AIMessage | None:
    """The model's answer in what a model call returned."""
    if isinstance(result, ExtendedModelResponse):
        result = result.model_response
    if isinstance(result, AIMessage):
        return result
    if isinstance(result, ModelResponse):
        return next((m for m in reversed(result.result) if isinstance(m, AIMessage)), None)
    return None


def _usage_for(batch: Sequence[Event], answer: tuple[str, ModelUsage] | None) -> ModelUsage | None:
    """The answer's usage, for the append of ``batch`` when it holds that answer."""
    if answer is None or not any(e.id == answer[0] for e in batch):
        return None
    return answer[1]
