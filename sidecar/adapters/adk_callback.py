"""Google ADK: a before-model callback for agents that keep their own session service."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.events.event import Event as AdkEvent
from google.adk.flows.llm_flows.contents import _get_contents
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse

from sidecar.adapters.adk_mapping import LABEL_KIND, event_to_sidecar, session_key, window_to_adk
from sidecar.adapters.clients import BARRIER, LoopClients
from sidecar.client import AlreadyExistsError, AsyncClient
from sidecar.compaction.policy import CompactionPolicy

_APPEND_BATCH = 500


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
        self._sent: dict[str, set[str]] = {}

    async def close(self) -> None:
        await self._clients.close()

    async def _mirror(self, key: str, events: Sequence[AdkEvent]) -> bool:
        """Append the events not sent yet; True when a background summary was started."""
        client = self._clients.get()
        sent = self._sent.get(key)
        if sent is None:
            with contextlib.suppress(AlreadyExistsError):  # made by an earlier process
                await client.create_session(key, self.policy, {LABEL_KIND: "mirror"})
            sent = self._sent[key] = set()
        new = [e for e in events if not e.partial and e.id not in sent]
        scheduled = False
        handle = client.session(key)
        for start in range(0, len(new), _APPEND_BATCH):
            batch = [event_to_sidecar(e) for e in new[start : start + _APPEND_BATCH]]
            try:
                scheduled = (await handle.append(batch)).compaction_scheduled or scheduled
            except AlreadyExistsError:
                # Stored before in another form (by an earlier version of this mapping, on
                # a restart's re-mirror): the stored one stays, the rest are appended.
                for event in batch:
                    with contextlib.suppress(AlreadyExistsError):
                        appended = await handle.append([event])
                        scheduled = appended.compaction_scheduled or scheduled
            sent.update(e.id for e in batch)
        return scheduled

    async def __call__(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        session = callback_context.session
        key = session_key(self.namespace, session.app_name, session.user_id, session.id)
        scheduled = await self._mirror(key, session.events)
        handle = self._clients.get().session(key)
        if self.await_compaction and scheduled:
            await handle.compact(BARRIER)
        window = (await handle.context()).events
        invocation = callback_context._invocation_context
        keep_ids = any(
            part.function_call is not None and part.function_call.id
            for content in llm_request.contents
            for part in content.parts or []
        )
        llm_request.contents = _get_contents(
            invocation.branch,
            window_to_adk(window, self.summary_author or callback_context.agent_name),
            callback_context.agent_name,
            preserve_function_call_ids=keep_ids,
        )
        return None
