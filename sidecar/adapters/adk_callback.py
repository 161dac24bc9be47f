"""Google ADK: a before-model callback for agents that keep their own session service."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.events.event import Event as AdkEvent
from google.adk.flows.llm_flows.contents import _get_contents
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions.session import Session as AdkSession
from google.adk.utils._agent_mode import AgentMode
from google.genai import types

from sidecar.adapters.adk_cache import CachePrefix
from sidecar.adapters.adk_mapping import (
    LABEL_KIND,
    event_to_sidecar,
    prompt_tokens,
    session_key,
    window_to_adk,
)
from sidecar.adapters.clients import BARRIER, LoopClients
from sidecar.adapters.usage import Recent, append_reporting, model_usage
from sidecar.client import AlreadyExistsError, AsyncClient, ModelUsage
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.tokens import STAND_IN_KEY
from sidecar.model import Event

_APPEND_BATCH = 500


@dataclass(frozen=True, slots=True)
class _Call:
    """A model call this callback prepared: the version of the window it was given, and who
    made it (its answer is the next event of that agent and invocation to carry usage)."""

    version: int
    author: str
    invocation_id: str

    def answered_by(self, event: AdkEvent) -> bool:
        return (
            event.author == self.author
            and event.invocation_id == self.invocation_id
            and prompt_tokens(event) is not None
        )


class CompactingModelCallback:
    """A ``before_model_callback`` that hands the model the compacted window.

    For agents that keep their own session service: before each model call
    the session's new events are mirrored into the service (idempotent by
    event id), and the request's contents are rebuilt by ADK's own content
    builder from the active window (summary turn included) instead of the
    whole session. The session service is untouched; the history stays
    whole there and in the service's log. With ``await_compaction`` (the
    default, as ADK waits for its own compaction) a call whose mirror started
    a background summary waits for it, so this very model call carries it.

    The model's answer reaches the service with the next mirror (the
    invocation's last answer: with the next invocation's first model call),
    carrying the prompt tokens its provider reported for the window it was
    given, so the session's token estimates are calibrated by them.

    ``cache_prefix(session)`` is the cache prefix of the window the last
    call was given (see ``adk_cache``): pass it on with
    ``before_model_callback=[callback, cache_prefix_hints(callback)]``.
    """

    def __init__(
        self,
        target: AsyncClient | str,
        *,
        policy: CompactionPolicy | None = None,
        await_compaction: bool = True,
        summary_author: str | None = None,
        namespace: str = "adk-mirror",
        **client_options: Any,
    ) -> None:
        self._clients = LoopClients(target, client_options)
        self.policy = policy
        self.await_compaction = await_compaction
        self.summary_author = summary_author
        self.namespace = namespace
        # Per session, the ids mirrored: the most recent sessions only. A session forgotten
        # sends its events again, which stores nothing twice (an append is idempotent).
        self._sent: Recent[set[str]] = Recent()
        self._calls: Recent[_Call] = Recent()
        self._prefixes: Recent[CachePrefix] = Recent()

    async def close(self) -> None:
        await self._clients.close()

    def cache_prefix(self, session: AdkSession) -> CachePrefix | None:
        """The cache prefix of the window this callback last gave ``session``'s model call."""
        return self._prefixes.get(self._key(session))

    def _key(self, session: AdkSession) -> str:
        return session_key(self.namespace, session.app_name, session.user_id, session.id)

    async def _mirror(self, key: str, events: Sequence[AdkEvent]) -> bool:
        """Append the events not sent yet, the last call's answer with its usage; True when a
        background summary was started."""
        client = self._clients.get()
        sent = self._sent.get(key)
        if sent is None:
            with contextlib.suppress(AlreadyExistsError):  # made by an earlier process
                await client.create_session(key, self.policy, {LABEL_KIND: "mirror"})
            sent = set()
            self._sent.set(key, sent)
        new = [e for e in events if not e.partial and e.id not in sent]
        call = self._calls.pop(key)
        answer = next((e for e in new if call is not None and call.answered_by(e)), None)
        usage = model_usage(call.version, prompt_tokens(answer)) if call and answer else None
        scheduled = False
        handle = client.session(key)
        for start in range(0, len(new), _APPEND_BATCH):
            batch = [event_to_sidecar(e) for e in new[start : start + _APPEND_BATCH]]
            reported = _usage_for(batch, answer, usage)
            try:
                appended = await append_reporting(handle, batch, reported, stand_ins=True)
                scheduled = appended.compaction_scheduled or scheduled
            except AlreadyExistsError:
                # Stored before in another form (by an earlier version of this mapping, on
                # a restart's re-mirror): the stored one stays, the rest are appended.
                for event in batch:
                    with contextlib.suppress(AlreadyExistsError):
                        appended = await append_reporting(
                            handle, [event], _usage_for([event], answer, usage), stand_ins=True
                        )
                        scheduled = appended.compaction_scheduled or scheduled
            sent.update(e.id for e in batch)
        return scheduled

    async def __call__(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        session = callback_context.session
        key = self._key(session)
        scheduled = await self._mirror(key, session.events)
        invocation = callback_context._invocation_context
        if (
            getattr(invocation.agent, "include_contents", "default") != "default"
            or llm_request.previous_interaction_id
        ):
            # ADK sends this model the current turn only (or the provider keeps the
            # earlier turns): no history to compact, so the request stays as ADK made it.
            return None
        handle = self._clients.get().session(key)
        if self.await_compaction and scheduled:
            await handle.compact(BARRIER)
        context = await handle.context()
        self._prefixes.set(key, CachePrefix.of(context))
        window = context.events
        self._calls.set(
            key, _Call(context.version, callback_context.agent_name, callback_context.invocation_id)
        )
        keep_ids = any(
            part.function_call is not None and part.function_call.id
            for content in llm_request.contents
            for part in content.parts or []
        )
        run_config = invocation.run_config
        built = functools.partial(  # ADK's own content builder, as its contents processor calls it
            _get_contents,
            invocation.branch,
            agent_name=callback_context.agent_name,
            preserve_function_call_ids=keep_ids,
            isolation_scope=invocation.isolation_scope,
            node_path=invocation.node_path,
            is_single_turn=getattr(invocation.agent, "mode", None) == AgentMode.SINGLE_TURN,
            user_content=invocation.user_content,
            include_thoughts_from_other_agents=bool(
                run_config and run_config.include_thoughts_from_other_agents
            ),
        )
        adk_window = window_to_adk(window, self.summary_author or callback_context.agent_name)
        # An event stored as its stand-in (past the service's max_event_bytes) goes to the
        # model as ADK has it while it is in the window.
        originals = {e.id: e for e in session.events}
        adk_window = [
            originals.get(ours.id, adk) if _stood_in(ours) else adk
            for ours, adk in zip(window, adk_window, strict=True)
        ]
        compacted = built(adk_window)
        spliced = _spliced(llm_request.contents, built(list(session.events)), compacted)
        llm_request.contents = compacted if spliced is None else spliced
        return None


def _stood_in(event: Event) -> bool:
    """Whether the window shows the event's stand-in (not a clearing's placeholder)."""
    return STAND_IN_KEY in event.metadata and not event.cleared


def _spliced(
    request: list[types.Content], history: list[types.Content], window: list[types.Content]
) -> list[types.Content] | None:
    """The request with the part of its history the service compacted replaced by the window's
    head; None when the request is not ``history`` with contents added.

    ADK's processors add to the history they build: the dynamic instruction of an agent with
    a ``static_instruction`` (first, or before the current turn), ``RunConfig``'s
    ``model_input_context``, tools' instructions, and may change the history in place (a
    planner clears ``thought``). Everything the request holds from the kept tail on stays as
    ADK made it, what it added stays where ADK put it (at the start, or before the kept tail
    when it stood among the compacted part), and only the compacted part gives way to the
    window's head (the summary turn, the kept events before the tail).
    """
    tail = _common_suffix(history, window)
    kept_from = len(history) - tail  # where in the history the window's tail starts
    first: list[types.Content] = []
    before_tail: list[types.Content] = []
    rest: list[types.Content] = []
    matched = 0
    for content in request:
        if matched < len(history) and _same(content, history[matched]):
            if matched >= kept_from:
                rest.append(content)
            matched += 1
        elif matched == 0:
            first.append(content)
        elif matched <= kept_from:
            before_tail.append(content)
        else:
            rest.append(content)
    if matched < len(history):
        return None
    return first + window[: len(window) - tail] + before_tail + rest


def _common_suffix(a: list[types.Content], b: list[types.Content]) -> int:
    count = 0
    while count < min(len(a), len(b)) and a[-1 - count] == b[-1 - count]:
        count += 1
    return count


def _same(sent: types.Content, built: types.Content) -> bool:
    """Whether ``sent`` is ADK's ``built`` content, perhaps with ``thought`` cleared since."""
    if sent == built:
        return True
    return sent.role == built.role and [
        part.model_copy(update={"thought": None}) for part in sent.parts or []
    ] == [part.model_copy(update={"thought": None}) for part in built.parts or []]


def _usage_for(
    batch: Sequence[Event], answer: AdkEvent | None, usage: ModelUsage | None
) -> ModelUsage | None:
    """``usage`` for the append of ``batch`` when it holds the answer the usage is for."""
    if answer is None or not any(e.id == answer.id for e in batch):
        return None
    return usage
