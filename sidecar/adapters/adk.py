"""Google ADK on the compaction sidecar: a session service, and a before-model callback.

``CompactionSessionService`` is a ``BaseSessionService``: the Runner appends
every event to the service's log and ``get_session`` returns the *active
window* — the compacted context, with the summary turn rendered as ADK
content — so the Runner's model calls see compacted context and
``get_session`` costs O(window), not O(history). Nothing is deleted: archived
events stay in the service's log and stay searchable.

``CompactingModelCallback`` is for agents that keep their own session
service: as a ``before_model_callback`` it mirrors the session's events into
the service and replaces the request's contents with the compacted window.

Events map to ours field by field (text, function calls and responses,
inline and file data, author, branch) and back without loss: the rest of the
ADK event (invocation id, actions with their state delta, usage...) travels
as JSON in the event's metadata, and content that the field mapping cannot
rebuild exactly (thoughts, several text parts, signatures) is kept verbatim
beside it (see ``adk_mapping``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExistsError
from google.adk.events.event import Event as AdkEvent
from google.adk.flows.llm_flows.contents import _get_contents
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session as AdkSession
from google.adk.sessions.state import State

from sidecar.adapters.adk_mapping import (
    LABEL_APP,
    LABEL_KIND,
    LABEL_NAMESPACE,
    LABEL_SESSION,
    LABEL_USER,
    adk_policy,
    event_from_sidecar,
    event_to_sidecar,
    identity_labels,
    merged_state,
    session_key,
    split_state,
    state_labels,
    state_of,
    window_to_adk,
)
from sidecar.client import (
    AlreadyExistsError,
    AsyncClient,
    FailedPreconditionError,
    NotFoundError,
)
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.model import Session

__all__ = [
    "CompactingModelCallback",
    "CompactionSessionService",
    "adk_policy",
    "event_from_sidecar",
    "event_to_sidecar",
    "session_key",
]

_APPEND_BATCH = 500

# A compaction "pass" that never fires: Compact waits for a summary in flight first.
_BARRIER = CompactionPolicy(trigger=None, strategy=SlidingWindow())


# -- the session service ----------------------------------------------------------------


class _Clients:
    """One ``AsyncClient`` per event loop: a grpc.aio channel belongs to the loop that made it
    (``Runner.run`` runs its own loop in a thread)."""

    def __init__(self, target: AsyncClient | str, options: Mapping[str, Any]) -> None:
        self._fixed = target if isinstance(target, AsyncClient) else None
        self._address = target if isinstance(target, str) else ""
        self._options = dict(options)
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> AsyncClient:
        if self._fixed is not None:
            return self._fixed
        loop = asyncio.get_running_loop()
        client = self._by_loop.get(loop)
        if client is None:
            client = AsyncClient(self._address, **self._options)
            self._by_loop[loop] = client
        return client

    async def close(self) -> None:
        """Close the clients this object made (not one it was given)."""
        loop = asyncio.get_running_loop()
        client = self._by_loop.pop(loop, None)
        if client is not None:
            await client.close()


class CompactionSessionService(BaseSessionService):
    """An ADK session service whose sessions live in the compaction sidecar.

    ``target`` is an ``AsyncClient`` or an address (then one client per
    event loop is made with ``client_options``). New sessions get ``policy``
    (None: the server's default; see ``adk_policy`` for ADK's settings).
    ``get_session`` returns the active window: archived events are not
    loaded, the summary turn is. With ``await_compaction`` an append that
    started a background summary waits for it to land, so the next
    ``get_session`` sees it (deterministic runs, tests); otherwise it lands
    when it lands. State lives in the session's labels (app and user state
    in one holder session per app and per user), at most ~58 KB of JSON each.
    """

    def __init__(
        self,
        target: AsyncClient | str,
        *,
        policy: CompactionPolicy | None = None,
        await_compaction: bool = False,
        summary_author: str | None = None,
        namespace: str = "adk",
        **client_options: Any,
    ) -> None:
        self._clients = _Clients(target, client_options)
        self.policy = policy
        self.await_compaction = await_compaction
        self.summary_author = summary_author
        self.namespace = namespace

    async def close(self) -> None:
        await self._clients.close()

    def _key(self, app_name: str, user_id: str, session_id: str) -> str:
        return session_key(self.namespace, app_name, user_id, session_id)

    def _app_key(self, app_name: str) -> str:
        return session_key(self.namespace + "-app", app_name, "", "")

    def _user_key(self, app_name: str, user_id: str) -> str:
        return session_key(self.namespace + "-user", app_name, user_id, "")

    # -- state holders --

    async def _scope_state(self, key: str) -> dict[str, Any]:
        try:
            return state_of((await self._clients.get().get_session(key)).labels)
        except NotFoundError:
            return {}

    async def _update_state(
        self, key: str, identity: Mapping[str, str], delta: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Merge ``delta`` into a session's state labels: read, merge, write at that version."""
        client = self._clients.get()
        if not delta:
            return await self._scope_state(key)
        for _ in range(8):
            try:
                current = await client.get_session(key)
            except NotFoundError:
                try:
                    await client.create_session(key, None, {**identity, **state_labels(delta)})
                    return dict(delta)
                except AlreadyExistsError:
                    continue
            state = {**state_of(current.labels), **delta}
            labels = {**identity_labels(current.labels), **state_labels(state)}
            try:
                await client.update_session(key, labels=labels, expected_version=current.version)
                return state
            except FailedPreconditionError:
                continue  # someone else wrote meanwhile: merge again
        raise RuntimeError(f"state of {key!r} kept changing; gave up after 8 attempts")

    def _session_labels(self, app_name: str, user_id: str, session_id: str) -> dict[str, str]:
        """What identifies a session among the labels (and lets list_sessions filter)."""
        return {
            LABEL_NAMESPACE: self.namespace,
            LABEL_KIND: "session",
            LABEL_APP: app_name,
            LABEL_USER: user_id,
            LABEL_SESSION: session_id,
        }

    def _holder_labels(self, kind: str, app_name: str, user_id: str = "") -> dict[str, str]:
        labels = {LABEL_NAMESPACE: self.namespace, LABEL_KIND: kind, LABEL_APP: app_name}
        if user_id:
            labels[LABEL_USER] = user_id
        return labels

    async def _write_shared_state(
        self, app_name: str, user_id: str, app: Mapping[str, Any], user: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        app_state, user_state = await asyncio.gather(
            self._update_state(
                self._app_key(app_name), self._holder_labels("app_state", app_name), app
            ),
            self._update_state(
                self._user_key(app_name, user_id),
                self._holder_labels("user_state", app_name, user_id),
                user,
            ),
        )
        return app_state, user_state

    # -- BaseSessionService --

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        own, app, user = split_state(state or {})
        labels = {**self._session_labels(app_name, user_id, session_id), **state_labels(own)}
        key = self._key(app_name, user_id, session_id)
        try:
            created = await self._clients.get().create_session(key, self.policy, labels)
        except AlreadyExistsError as exc:
            raise AdkAlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        app_state, user_state = await self._write_shared_state(app_name, user_id, app, user)
        return AdkSession(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=merged_state(own, app_state, user_state),
            events=[],
            last_update_time=created.update_time.timestamp(),
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        """The session with its active window: O(window), whatever the history's length."""
        client = self._clients.get()
        key = self._key(app_name, user_id, session_id)
        try:
            context, header, app_state, user_state = await asyncio.gather(
                client.session(key).context(),
                client.get_session(key),
                self._scope_state(self._app_key(app_name)),
                self._scope_state(self._user_key(app_name, user_id)),
            )
        except NotFoundError:
            return None
        events = window_to_adk(context.events, self.summary_author)
        if config is not None:
            if config.after_timestamp is not None:
                after = config.after_timestamp
                events = [e for e in events if e.timestamp >= after]
            if config.num_recent_events is not None:
                n = config.num_recent_events
                events = events[-n:] if n else []
        return AdkSession(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=merged_state(state_of(header.labels), app_state, user_state),
            events=events,
            last_update_time=header.update_time.timestamp(),
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's (or the user's) sessions, oldest update first; no events, own state only."""
        label_filter = {
            LABEL_NAMESPACE: self.namespace,
            LABEL_KIND: "session",
            LABEL_APP: app_name,
        }
        if user_id is not None:
            label_filter[LABEL_USER] = user_id
        found: list[Session] = [
            s async for s in self._clients.get().list_sessions(label_filter=label_filter)
        ]
        found.sort(key=lambda s: s.update_time)
        return ListSessionsResponse(
            sessions=[
                AdkSession(
                    id=s.labels[LABEL_SESSION],
                    app_name=app_name,
                    user_id=s.labels[LABEL_USER],
                    state=state_of(s.labels),
                    events=[],
                    last_update_time=s.update_time.timestamp(),
                )
                for s in found
            ]
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and its whole log; a missing session is not an error (as in ADK)."""
        try:
            await self._clients.get().delete_session(self._key(app_name, user_id, session_id))
        except NotFoundError:
            return

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._scope_state(self._user_key(app_name, user_id))

    async def append_event(self, session: AdkSession, event: AdkEvent) -> AdkEvent:
        """Store the event (temp state trimmed), then apply it to ``session`` as ADK does.

        Stored first: when the service refuses it, the in-memory session is
        left unchanged. Re-sending an event id is a no-op on the service.
        """
        if event.partial:
            return event
        delta = dict(event.actions.state_delta) if event.actions else {}
        own, app, user = split_state(delta)
        stored = event
        if len(own) + len(app) + len(user) != len(delta):
            stored = event.model_copy(deep=True)
            stored.actions.state_delta = {
                k: v for k, v in delta.items() if not k.startswith(State.TEMP_PREFIX)
            }
        client = self._clients.get()
        key = self._key(session.app_name, session.user_id, session.id)
        handle = client.session(key)
        result = await handle.append([event_to_sidecar(stored)])
        if own:
            identity = self._session_labels(session.app_name, session.user_id, session.id)
            await self._update_state(key, identity, own)
        if app or user:
            await self._write_shared_state(session.app_name, session.user_id, app, user)
        if self.await_compaction and result.compaction_scheduled:
            await handle.compact(_BARRIER)
        event = await super().append_event(session=session, event=event)
        session.last_update_time = event.timestamp
        return event


# -- the before-model callback ----------------------------------------------------------


class CompactingModelCallback:
    """A ``before_model_callback`` that hands the model the compacted window.

    For agents that keep their own session service: before each model call
    the session's new events are mirrored into the service (idempotent by
    event id), and the request's contents are rebuilt by ADK's own content
    builder from the active window (summary turn included) instead of the
    whole session. The session service is untouched; the history stays
    whole there and in the service's log.
    """

    def __init__(
        self,
        target: AsyncClient | str,
        *,
        policy: CompactionPolicy | None = None,
        await_compaction: bool = False,
        summary_author: str | None = None,
        namespace: str = "adk-mirror",
        **client_options: Any,
    ) -> None:
        self._clients = _Clients(target, client_options)
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
            batch = new[start : start + _APPEND_BATCH]
            result = await handle.append([event_to_sidecar(e) for e in batch])
            scheduled = scheduled or result.compaction_scheduled
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
            await handle.compact(_BARRIER)
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
