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
summary, the way ``SummarizationMiddleware`` would run after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import uuid
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.config import get_config
from langgraph.runtime import Runtime

from sidecar.adapters.langchain_cache import ANTHROPIC_MIN_TOKENS, CacheHints, with_cache_hints
from sidecar.adapters.langchain_reasoning import (
    call_signatures,
    provenance,
    reasoning_of,
    restored,
    verbatim,
    with_reasoning,
)
from sidecar.adapters.usage import Recent, append_reporting, append_reporting_sync, model_usage
from sidecar.client import AlreadyExistsError, AsyncClient, Client, ModelUsage, SessionContext
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.providers.conversation import orphan_text

_ID = re.compile(r"[A-Za-z0-9._:~@/+=-]{1,128}")
_SAFE_ID = re.compile(r"[^A-Za-z0-9._~@+=-]")
_APPEND_BATCH = 500
# A compaction "pass" that never fires: Compact waits for a summary in flight first.
_BARRIER = CompactionPolicy(trigger=None, strategy=SlidingWindow())

SessionIdFn = Callable[[Runtime[Any]], str]


def clear_tool_uses_policy(
    *,
    trigger: int = 100_000,
    clear_at_least: int = 0,
    keep: int = 3,
    clear_tool_inputs: bool = False,
    exclude_tools: Sequence[str] = (),
    placeholder: str = "[cleared]",
    then_summarize: Summarize | None = None,
    keep_reasoning_turns: int | None = None,
) -> CompactionPolicy:
    """LangChain's ``ClearToolUsesEdit`` settings (its defaults too) as a session policy.

    At ``trigger`` tokens the results of all but the newest ``keep`` tool
    uses become ``placeholder`` (``{name}`` and ``{call_id}`` may name the
    call), unless that frees fewer than ``clear_at_least`` tokens. Unlike the
    middleware's edit, which rewrites the request each call, the clearing is
    stored: the state and the session's log keep the originals, search finds
    them, and the provider's cached prefix changes only when a pass lands.
    With ``then_summarize`` the policy is a pipeline: the summary runs only if
    the window is still at ``trigger`` once cleared. ``keep_reasoning_turns``
    (beyond LangChain) also clears the reasoning text of older turns, their
    signatures kept.
    """
    clear = ClearToolResults(
        keep_tool_uses=keep,
        exclude_tools=tuple(exclude_tools),
        clear_tool_inputs=clear_tool_inputs,
        min_cleared_tokens=clear_at_least,
        placeholder=placeholder,
        keep_reasoning_turns=keep_reasoning_turns,
    )
    strategy = clear if then_summarize is None else Pipeline((clear, then_summarize))
    return CompactionPolicy(trigger=TokenCount(trigger), strategy=strategy)


def policy_from_clear_tool_uses_edit(
    edit: Any, *, then_summarize: Summarize | None = None
) -> CompactionPolicy:
    """``clear_tool_uses_policy`` from a LangChain ``ClearToolUsesEdit``."""
    return clear_tool_uses_policy(
        trigger=edit.trigger,
        clear_at_least=edit.clear_at_least,
        keep=edit.keep,
        clear_tool_inputs=edit.clear_tool_inputs,
        exclude_tools=tuple(edit.exclude_tools),
        placeholder=edit.placeholder,
        then_summarize=then_summarize,
    )


def _text(message: BaseMessage) -> str:
    """The text of a message; non-text blocks (images...) are not sent to the service."""
    if isinstance(message.content, str):
        return message.content
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def event_id(message: BaseMessage) -> str:
    """The message's id when the service accepts it, else a stable hash of the message."""
    if message.id and _ID.fullmatch(message.id):
        return message.id
    basis = message.id or json.dumps(message.model_dump(mode="json"), sort_keys=True)
    return "lc-" + hashlib.sha256(basis.encode()).hexdigest()[:40]


def message_to_event(message: BaseMessage) -> Event | None:
    """Our event for a LangChain message (None for kinds the service has no role for)."""
    common: dict[str, Any] = {"id": event_id(message), "text": _text(message)}
    common["metadata"] = {"lc.type": message.type}
    if isinstance(message, HumanMessage):
        return Event(role=Role.USER, **common)
    if isinstance(message, SystemMessage):
        return Event(role=Role.SYSTEM, **common)
    if isinstance(message, AIMessage):
        signatures = call_signatures(message)
        calls = tuple(
            ToolCall(
                id=call.get("id") or f"{common['id']}-{i}",
                name=call["name"],
                arguments_json=json.dumps(call.get("args", {}), ensure_ascii=False),
                signature=signatures.get(call.get("id") or "", b""),
            )
            for i, call in enumerate(message.tool_calls)
        )
        common["metadata"].update(verbatim(message))
        common["metadata"].update(provenance(message))
        return Event(
            role=Role.ASSISTANT,
            tool_calls=calls,
            reasoning=reasoning_of(message),
            author=message.name or "",
            **common,
        )
    if isinstance(message, ToolMessage):
        result = ToolResult(
            call_id=message.tool_call_id,
            name=message.name or "",
            content=common.pop("text"),
            is_error=message.status == "error",
        )
        return Event(role=Role.TOOL, tool_results=(result,), **common)
    return None


def event_to_message(event: Event) -> AnyMessage:
    """A LangChain message for one of ours: the summary turn, or an event not in the state."""
    match event.role:
        case Role.USER:
            return HumanMessage(content=event.text, id=event.id)
        case Role.SYSTEM:
            return SystemMessage(content=event.text, id=event.id)
        case Role.TOOL:
            result = event.tool_results[0]
            return ToolMessage(
                content=result.content,
                tool_call_id=result.call_id,
                name=result.name or None,
                status="error" if result.is_error else "success",
                id=event.id,
            )
        case Role.ASSISTANT:
            calls = [
                {"id": c.id, "name": c.name, "args": json.loads(c.arguments_json or "{}")}
                for c in event.tool_calls
            ]
            content, kwargs = restored(event)
            if event.cleared:
                content, kwargs = with_reasoning(content, kwargs, event.reasoning)
            return AIMessage(
                content=content, additional_kwargs=kwargs, tool_calls=calls, id=event.id
            )
    raise ValueError(f"unknown role {event.role!r}")


def compacted_messages(
    window: Sequence[Event],
    messages: Sequence[AnyMessage],
    mirrored: Collection[str] | None = None,
) -> list[AnyMessage]:
    """The model's messages: the window in log order, each kept event as the state's own message.

    A cleared event's message is a copy showing its placeholder (the state's
    message keeps the original, as the log does).

    Only messages the window archived, and ones the graph no longer has
    (removed from its state), are left out. A message edited in place keeps
    its id, so the model gets the edited one. Messages the session has
    never seen (``mirrored``: the ids sent to it; by default everything after
    the last message the window keeps) — another middleware's, or ones that
    reached the state after the window was read — stay where they stand,
    before the kept message that follows them. System messages stay in place
    like any other (the latest is never archived).
    """
    by_id = {event_id(m): m for m in messages}
    kept = {e.id for e in window if not e.synthetic}
    if mirrored is None:
        last = max((i for i, m in enumerate(messages) if event_id(m) in kept), default=-1)
        mirrored = {event_id(m) for m in messages[: last + 1]}
    before: dict[str, list[AnyMessage]] = {}
    pending: list[AnyMessage] = []
    for message in messages:
        mid = event_id(message)
        if mid in kept:
            before[mid] = pending
            pending = []
        elif mid not in mirrored:
            pending.append(message)
    out: list[AnyMessage] = []
    for event in window:
        own = by_id.get(event.id) if not event.synthetic else None
        if own is None and not event.synthetic:
            continue  # no longer in the graph's messages (a RemoveMessage): not sent either
        out.extend(before.get(event.id, ()))
        if own is not None and event.cleared:
            own = cleared_message(own, event)
        out.append(own if own is not None else event_to_message(event))
    out.extend(pending)
    return without_orphans(out)


def without_orphans(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``messages`` with each orphan ``ToolMessage`` (no call before it still waiting for
    its answer) as a ``HumanMessage`` of its ``orphan_text``, as the renderings have it."""
    waiting: dict[str, int] = {}
    out: list[AnyMessage] = []
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    waiting[str(call["id"])] = waiting.get(str(call["id"]), 0) + 1
        elif isinstance(message, ToolMessage):
            if waiting.get(message.tool_call_id, 0) > 0:
                waiting[message.tool_call_id] -= 1
            else:
                result = ToolResult(
                    call_id=message.tool_call_id,
                    name=message.name or "",
                    content=_text(message),
                    is_error=message.status == "error",
                )
                message = HumanMessage(content=orphan_text(result), id=message.id)
        out.append(message)
    return out


def cleared_message(message: AnyMessage, event: Event) -> AnyMessage:
    """A copy of the state's ``message`` showing what clearing left of it (the state keeps
    the original): a ``ToolMessage``'s placeholder, an ``AIMessage``'s cleared arguments
    and reasoning text (its signatures unchanged)."""
    if isinstance(message, ToolMessage) and event.tool_results:
        return message.model_copy(update={"content": event.tool_results[0].content})
    if isinstance(message, AIMessage):
        update: dict[str, Any] = {}
        if event.tool_calls:
            arguments = {c.id: c.arguments_json for c in event.tool_calls}
            update["tool_calls"] = [
                {**call, "args": json.loads(arguments[cid])}
                if (cid := call.get("id")) is not None and cid in arguments
                else call
                for call in message.tool_calls
            ]
        if event.reasoning:
            content, kwargs = with_reasoning(
                message.content, message.additional_kwargs, event.reasoning
            )
            update.update(content=content, additional_kwargs=kwargs)
        return message.model_copy(update=update)
    return message


def ensure_ids(messages: Sequence[BaseMessage]) -> None:
    """Give id-less messages an id in place, as LangChain's own middleware does, so that two
    equal messages stay two events (and the model gets both)."""
    for message in messages:
        if message.id is None:
            message.id = str(uuid.uuid4())


def _thread_session_id(runtime: Runtime[Any]) -> str:
    """The default session id: the graph run's ``thread_id``."""
    thread = get_config().get("configurable", {}).get("thread_id")
    if thread is None:
        raise ValueError("no thread_id in the run's config: pass session_id= to the middleware")
    return str(thread)


class SessionCompactionMiddleware(AgentMiddleware):
    """Mirror the agent's messages into a session; give the model the compacted context.

    ``target``: an address, a ``Client`` (sync agents) or an ``AsyncClient``
    (async agents). ``session_id``: a fixed id, a function of the runtime, or
    (default) the run's ``thread_id``; the service's id is
    ``<namespace>/<id>``. New sessions get ``policy`` (None: the server's
    default). With ``await_compaction`` a mirror that started a background
    summary waits for it, so this very call sees it (and the mirror at the
    run's end, so the next run's first call does).

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
        self._sent: dict[str, set[str]] = {}
        self._windows: dict[str, SessionContext] = {}
        # Per session: the last call's answer (its event id) and the usage to store with it.
        self._answers: Recent[tuple[str, ModelUsage]] = Recent()

    # -- clients and keys --

    def _client(self) -> Client:
        if self._sync is None:
            if not self._address:
                raise TypeError("a sync agent needs a Client or an address, not an AsyncClient")
            self._sync = Client(self._address, **self._options)
        return self._sync

    def _aclient(self) -> AsyncClient:
        if self._async is not None:
            return self._async
        if not self._address:
            raise TypeError("an async agent needs an AsyncClient or an address, not a Client")
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is None:  # a grpc.aio channel belongs to the loop that made it
            client = self._by_loop[loop] = AsyncClient(self._address, **self._options)
        return client

    def key(self, runtime: Runtime[Any]) -> str:
        """The service's session id for this run."""
        if isinstance(self.session_id, str):
            raw = self.session_id
        elif self.session_id is not None:
            raw = self.session_id(runtime)
        else:
            raw = _thread_session_id(runtime)
        return f"{self.namespace}/{_SAFE_ID.sub(lambda m: f':{ord(m.group()):02X}', raw)}"

    def _new_events(self, key: str, messages: Sequence[AnyMessage]) -> list[Event]:
        ensure_ids(messages)
        sent = self._sent.setdefault(key, set())
        events = [e for m in messages if (e := message_to_event(m)) is not None]
        return [e for e in events if e.id not in sent]

    # -- mirroring --

    def _mirror(self, key: str, messages: Sequence[AnyMessage]) -> None:
        """Append the messages not sent yet, the last call's answer with its usage; with
        ``await_compaction``, wait for a summary the appends started."""
        client = self._client()
        if key not in self._sent:
            with contextlib.suppress(AlreadyExistsError):
                client.create_session(key, self.policy, {"adapter": "langchain"})
        handle = client.session(key)
        new = self._new_events(key, messages)
        answer = self._answers.pop(key)
        scheduled = False
        for start in range(0, len(new), _APPEND_BATCH):
            batch = new[start : start + _APPEND_BATCH]
            try:
                appended = append_reporting_sync(handle, batch, _usage_for(batch, answer))
                scheduled = appended.compaction_scheduled or scheduled
            except AlreadyExistsError:  # a message edited in place: store the rest
                for event in batch:
                    with contextlib.suppress(AlreadyExistsError):
                        appended = append_reporting_sync(
                            handle, [event], _usage_for([event], answer)
                        )
                        scheduled = appended.compaction_scheduled or scheduled
            self._sent[key].update(e.id for e in batch)
        if self.await_compaction and scheduled:
            handle.compact(_BARRIER)

    async def _amirror(self, key: str, messages: Sequence[AnyMessage]) -> None:
        """``_mirror`` for async agents."""
        client = self._aclient()
        if key not in self._sent:
            with contextlib.suppress(AlreadyExistsError):
                await client.create_session(key, self.policy, {"adapter": "langchain"})
        handle = client.session(key)
        new = self._new_events(key, messages)
        answer = self._answers.pop(key)
        scheduled = False
        for start in range(0, len(new), _APPEND_BATCH):
            batch = new[start : start + _APPEND_BATCH]
            try:
                appended = await append_reporting(handle, batch, _usage_for(batch, answer))
                scheduled = appended.compaction_scheduled or scheduled
            except AlreadyExistsError:  # a message edited in place: store the rest
                for event in batch:
                    with contextlib.suppress(AlreadyExistsError):
                        appended = await append_reporting(
                            handle, [event], _usage_for([event], answer)
                        )
                        scheduled = appended.compaction_scheduled or scheduled
            self._sent[key].update(e.id for e in batch)
        if self.await_compaction and scheduled:
            await handle.compact(_BARRIER)

    # -- the hooks --

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Mirror the new messages, read the compacted window; never changes the state."""
        key = self.key(runtime)
        self._mirror(key, state["messages"])
        self._windows[key] = self._client().session(key).context()
        return None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``before_model`` for async agents."""
        key = self.key(runtime)
        await self._amirror(key, state["messages"])
        self._windows[key] = await self._aclient().session(key).context()
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Mirror the run's last messages (its last call's answer, with its usage)."""
        self._mirror(self.key(runtime), state["messages"])
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """``after_agent`` for async agents."""
        await self._amirror(self.key(runtime), state["messages"])
        return None

    def _compacted(self, request: ModelRequest[Any]) -> tuple[ModelRequest[Any], int | None]:
        """The request with the compacted messages (and the cache hint, with ``cache_hints``),
        and the version of the window they are."""
        key = self.key(request.runtime)
        context = self._windows.pop(key, None)
        if context is None:  # before_model did not run for this call: orphans aside, as it is
            answered = without_orphans(request.messages)
            if answered != list(request.messages):
                request = request.override(messages=answered)
            return request, None
        messages = compacted_messages(context.events, request.messages, self._sent.get(key, set()))
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
        self._answers.set(self.key(request.runtime), (event_id(message), usage))

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


def prefix_end(context: SessionContext, messages: Sequence[AnyMessage]) -> int | None:
    """The index among ``messages`` of the last one the window's stable prefix gave (None
    when the prefix is empty or none of its events is among them)."""
    stable = {e.id for e in context.events[: context.stable_prefix_events]}
    return max((i for i, m in enumerate(messages) if event_id(m) in stable), default=None)


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
