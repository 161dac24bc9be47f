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

Events map to ours field by field (text, thoughts and thought signatures,
function calls and responses, inline and file data, author, branch) and back
without loss: the rest of the ADK event (invocation id, actions with their
state delta, usage...) travels as JSON in the event's metadata, and content
that the field mapping cannot rebuild exactly (several text parts, media
before the text) is kept verbatim beside it (see ``adk_mapping`` and
``adk_content``). Session, app and user state are read and written at a
version, with the event that changes them, by ``adk_state``.

Both remember the cache prefix of the window each session's next model call
is built from; ``cache_prefix_hints`` passes it on (``adk_cache``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExistsError
from google.adk.events.event import Event as AdkEvent
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session as AdkSession
from google.adk.sessions.state import State

from sidecar.adapters.adk_cache import CachePrefix, cache_prefix_hints
from sidecar.adapters.adk_callback import CompactingModelCallback
from sidecar.adapters.adk_mapping import (
    LABEL_AGENT,
    LABEL_APP,
    LABEL_KIND,
    LABEL_NAMESPACE,
    LABEL_SESSION,
    LABEL_USER,
    adk_policy,
    app_state_key,
    event_from_sidecar,
    event_to_sidecar,
    holder_labels,
    json_safe,
    merged_state,
    prompt_tokens,
    session_key,
    session_labels,
    split_state,
    state_change,
    state_labels,
    state_of,
    update_time,
    user_state_key,
    window_to_adk,
)
from sidecar.adapters.adk_state import (
    append_with_state,
    read_header,
    read_state,
    shared_state,
    state_holders,
)
from sidecar.adapters.clients import BARRIER, LoopClients
from sidecar.adapters.usage import Recent, model_usage
from sidecar.client import AlreadyExistsError, AsyncClient, NotFoundError
from sidecar.compaction.policy import CompactionPolicy
from sidecar.model import Session

__all__ = [
    "CachePrefix",
    "CompactingModelCallback",
    "CompactionSessionService",
    "adk_policy",
    "cache_prefix_hints",
    "event_from_sidecar",
    "event_to_sidecar",
    "session_key",
]


class CompactionSessionService(BaseSessionService):
    """An ADK session service whose sessions live in the compaction sidecar.

    ``target`` is an ``AsyncClient`` or an address (then one client per
    event loop is made with ``client_options``). New sessions get ``policy``
    (None: the server's default; see ``adk_policy`` for ADK's settings).
    ``get_session`` returns the active window: archived events are not
    loaded, the summary turn is.

    A compaction that an append lands is applied to the caller's session at
    once (``session.events`` becomes the compacted window), so the
    invocation going on with it sees it — as ADK's own compaction after
    invocation N is seen by invocation N+1, whose first append (the user's
    message) is where the interval trigger fires here. With
    ``await_compaction`` (the default, as in ADK, where compaction runs
    before the run ends) an append that started a background summary waits
    for it; with False the summary lands in the background and a later
    ``get_session`` sees it.

    State lives in the session's labels (app and user state in one holder
    session per app and per user), at most ~58 KB of JSON each; an event and
    its state changes are stored in one request, or not at all.

    A model's answer is stored with the prompt tokens its provider reported
    (``usage_metadata.prompt_token_count``) for the version of the context
    the call was built from — the version this service last saw the session
    at (its last append, or the window it read) — so the session's token
    estimates are calibrated by them (docs/semantics.md, Calibration).

    ``cache_prefix(session)`` is the cache prefix of the window the
    session's next model call is built from (see ``adk_cache``): pass it on
    with ``before_model_callback=cache_prefix_hints(service)``.
    """

    def __init__(
        self,
        target: AsyncClient | str,
        *,
        policy: CompactionPolicy | None = None,
        await_compaction: bool = True,
        summary_author: str | None = None,
        namespace: str = "adk",
        **client_options: Any,
    ) -> None:
        self._clients = LoopClients(target, client_options)
        self.policy = policy
        self.await_compaction = await_compaction
        self.summary_author = summary_author
        self.namespace = namespace
        # Per session: the version of the window its next model call is built from.
        self._versions: Recent[int] = Recent()
        # Per session: that window's cache prefix.
        self._prefixes: Recent[CachePrefix] = Recent()

    async def close(self) -> None:
        await self._clients.close()

    def cache_prefix(self, session: AdkSession) -> CachePrefix | None:
        """The cache prefix of the window this service last gave ``session`` (read by
        ``get_session``, or left by a compaction an append landed); None before either.

        Appends keep it: they grow the window at its end. A summary landing in the
        background (``await_compaction=False``) changes it with the next ``get_session``,
        as it changes the events the model is given.
        """
        return self._prefixes.get(self._key(session.app_name, session.user_id, session.id))

    def _key(self, app_name: str, user_id: str, session_id: str) -> str:
        return session_key(self.namespace, app_name, user_id, _normalized(session_id))

    # -- BaseSessionService --

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        """Create a session; its state is checked (size, JSON form) before anything is written."""
        session_id = _normalized(session_id or "") or str(uuid.uuid4())
        own, app, user = split_state(state or {})
        labels = {
            **session_labels(self.namespace, app_name, user_id, session_id),
            **state_labels(own, "session"),
        }
        client = self._clients.get()
        app_key = app_state_key(self.namespace, app_name)
        user_key = user_state_key(self.namespace, app_name, user_id)
        app_holder, user_holder = await asyncio.gather(
            read_header(client, app_key), read_header(client, user_key)
        )
        # Refused here, before anything is written: the shared states as they would become.
        for holder, delta, scope in ((app_holder, app, "app"), (user_holder, user, "user")):
            state_change(holder.labels if holder is not None else {}, delta, scope)
        key = self._key(app_name, user_id, session_id)
        try:
            created = await client.create_session(key, self.policy, labels)
        except AlreadyExistsError as exc:
            raise AdkAlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        self._versions.set(key, created.version)
        try:
            app_state, user_state = await asyncio.gather(
                shared_state(
                    client,
                    app_key,
                    app_holder,
                    holder_labels(self.namespace, "app_state", app_name),
                    app,
                    "app",
                ),
                shared_state(
                    client,
                    user_key,
                    user_holder,
                    holder_labels(self.namespace, "user_state", app_name, user_id),
                    user,
                    "user",
                ),
            )
        except BaseException:
            # Refused means nothing stored: take the session back.
            with contextlib.suppress(Exception):
                await client.delete_session(key)
            raise
        return AdkSession(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=merged_state(json_safe(own), app_state, user_state),
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
                read_state(client, app_state_key(self.namespace, app_name)),
                read_state(client, user_state_key(self.namespace, app_name, user_id)),
            )
        except NotFoundError:
            return None
        self._versions.set(key, context.version)
        self._prefixes.set(key, CachePrefix.of(context))
        events = window_to_adk(
            context.events, self.summary_author, header.labels.get(LABEL_AGENT, "model")
        )
        if config is not None:
            if config.after_timestamp is not None:
                after = config.after_timestamp
                events = [e for e in events if e.timestamp >= after]
            if config.num_recent_events is not None:
                n = config.num_recent_events
                events = events[-n:] if n else []
        return AdkSession(
            id=_normalized(session_id),
            app_name=app_name,
            user_id=user_id,
            state=merged_state(state_of(header.labels), app_state, user_state),
            events=events,
            last_update_time=update_time(header),
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's (or the user's) sessions, oldest update first, without events; their
        state merged with the app's and each user's, as ADK's services list them."""
        label_filter = {
            LABEL_NAMESPACE: self.namespace,
            LABEL_KIND: "session",
            LABEL_APP: app_name,
        }
        if user_id is not None:
            label_filter[LABEL_USER] = user_id
        client = self._clients.get()
        found: list[Session] = [s async for s in client.list_sessions(label_filter=label_filter)]
        users = sorted({s.labels[LABEL_USER] for s in found})
        app_state, *user_states = await asyncio.gather(
            read_state(client, app_state_key(self.namespace, app_name)),
            *(read_state(client, user_state_key(self.namespace, app_name, u)) for u in users),
        )
        by_user = dict(zip(users, user_states, strict=True))
        listed = [
            AdkSession(
                id=s.labels[LABEL_SESSION],
                app_name=app_name,
                user_id=s.labels[LABEL_USER],
                state=merged_state(state_of(s.labels), app_state, by_user[s.labels[LABEL_USER]]),
                events=[],
                last_update_time=update_time(s),
            )
            for s in found
        ]
        listed.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=listed)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and its whole log; a missing session is not an error (as in ADK)."""
        key = self._key(app_name, user_id, session_id)
        self._versions.pop(key)
        self._prefixes.pop(key)
        try:
            await self._clients.get().delete_session(key)
        except NotFoundError:
            return

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await read_state(
            self._clients.get(), user_state_key(self.namespace, app_name, user_id)
        )

    async def append_event(self, session: AdkSession, event: AdkEvent) -> AdkEvent:
        """Store the event and its state changes in one request, then apply it as ADK does.

        Everything is mapped and checked first (state values as ADK stores
        them, state sizes), so a refusal stores nothing and leaves ``session``
        as it was. Re-sending an event stores nothing and adds nothing to
        ``session``. When the append lands a compaction, ``session.events``
        becomes the compacted window. A model's answer carries the usage its
        provider reported, for the version the call's window was at.
        """
        if event.partial:
            return event
        delta = dict(event.actions.state_delta) if event.actions else {}
        stored = event
        if any(k.startswith(State.TEMP_PREFIX) for k in delta):
            stored = event.model_copy(deep=True)
            stored.actions.state_delta = {
                k: v for k, v in delta.items() if not k.startswith(State.TEMP_PREFIX)
            }
        ours = event_to_sidecar(stored)
        key = self._key(session.app_name, session.user_id, session.id)
        handle = self._clients.get().session(key)
        usage = model_usage(self._versions.get(key), prompt_tokens(event))
        own, app, user = split_state(delta)
        result, written = await append_with_state(
            self._clients.get(),
            key=key,
            session_id=session.id,
            ours=ours,
            event=stored,
            usage=usage,
            own=own,
            holders=state_holders(self.namespace, session.app_name, session.user_id, app, user),
        )
        self._versions.set(key, result.version)
        duplicate = any(e.id == event.id for e in session.events)
        if not written and duplicate:
            return event  # a re-sent event: one copy, in the store and in the session
        if result.compaction_scheduled and self.await_compaction:
            await handle.compact(BARRIER)
            landed = True
        else:
            landed = result.compaction is not None and result.compaction.compacted
        if not duplicate:
            event = await super().append_event(session=session, event=event)
        session.last_update_time = event.timestamp
        if landed:
            context = await handle.context()
            self._versions.set(key, context.version)
            self._prefixes.set(key, CachePrefix.of(context))
            window = context.events
            mine = {e.id: e for e in session.events}
            agents = [e.author for e in session.events if e.author not in ("", "user")]
            default_author = agents[-1] if agents else "model"
            # The caller's own events stay, unless clearing changed them: the invocation's
            # next model call sees the placeholders at once, as the next get_session would.
            session.events[:] = [
                rendered if e.synthetic or e.cleared else mine.get(e.id, rendered)
                for e, rendered in zip(
                    window, window_to_adk(window, self.summary_author, default_author), strict=True
                )
            ]
        return event


def _normalized(session_id: str) -> str:
    """Session ids without surrounding whitespace, on every call (as ADK's services do)."""
    return session_id.strip()
