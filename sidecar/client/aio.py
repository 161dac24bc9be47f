"""The asyncio client: ``AsyncClient`` for sessions, ``SessionHandle`` for one session's log.

Every method takes and returns the domain's dataclasses (``sidecar.model``),
never protobuf messages. A failed call raises ``ClientError`` (a subclass per
status code) carrying the server's details. Reads and appends are retried on
UNAVAILABLE (see ``retry.py``); appends are safe to retry because every event
gets its id before the first attempt. CreateSession, Compact and the streams
are never retried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import grpc

from sidecar.client import decode, requests
from sidecar.client.channel import Options, Tls, auth_metadata, channel_options
from sidecar.client.errors import error_from_rpc
from sidecar.client.requests import KEEP, Keep
from sidecar.client.results import AppendResult, SearchHit, SessionContext, SessionInfo
from sidecar.client.retry import RetryPolicy, retry_async
from sidecar.client.streams import EventStream, Watch
from sidecar.compaction.policy import CompactionPolicy
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import session_pb2
from sidecar.model import CompactionResult, Event, LabelUpdate, ModelUsage, Role
from sidecar.providers.render import ContextFormat
from sidecar.store.protocol import CompactionRecord

Req = TypeVar("Req")
Resp = TypeVar("Resp")
T = TypeVar("T")


async def _paged(fetch: Callable[[str], Awaitable[tuple[Iterable[T], str]]]) -> AsyncIterator[T]:
    """Every item of every page: ``fetch(page_token)`` returns a page and the next token."""
    token = ""
    while True:
        items, token = await fetch(token)
        for item in items:
            yield item
        if not token:
            return


# Reads of a window too large for one answer, before taking the newest pages as they are.
_WHOLE_WINDOW_TRIES = 3


class AsyncClient:
    """A connection to the compaction sidecar, for asyncio code.

    ``token`` is sent as ``authorization: Bearer <token>`` on every call;
    ``tls`` connects over TLS (plaintext without it, as to a local sidecar).
    ``default_timeout`` bounds each call, retries and backoffs included (None:
    no deadline). ``retries`` is how many times a safe call is repeated after
    UNAVAILABLE; ``retry_policy`` sets the backoff too. ``interceptors`` are
    grpc.aio client interceptors (tracing, tests). Use it as an async context
    manager, or call ``close()``.
    """

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        tls: Tls | None = None,
        default_timeout: float | None = 30.0,
        retries: int = 3,
        retry_policy: RetryPolicy | None = None,
        options: Options = (),
        interceptors: Sequence[Any] = (),
    ) -> None:
        opts = channel_options(options)
        if tls is None:
            self._channel = grpc.aio.insecure_channel(
                address, options=opts, interceptors=interceptors
            )
        else:
            self._channel = grpc.aio.secure_channel(
                address, tls.credentials(), options=opts, interceptors=interceptors
            )
        self._stub = pb_grpc.CompactionServiceStub(self._channel)
        self._metadata = auth_metadata(token)
        self.default_timeout = default_timeout
        self.retry_policy = retry_policy or RetryPolicy(retries=retries)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; open streams and watches end."""
        await self._channel.close(None)

    async def _unary(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        *,
        retry: bool,
        timeout_s: float | None = None,
    ) -> Resp:
        """One call, retried on UNAVAILABLE when ``retry`` (the caller vouches it is safe)."""

        async def attempt(time_left: float | None) -> Resp:
            return await method(request, timeout=time_left, metadata=self._metadata)

        budget = self.default_timeout if timeout_s is None else timeout_s
        try:
            if retry:
                return await retry_async(attempt, self.retry_policy, budget)
            return await attempt(budget)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    # -- sessions ---------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        policy: CompactionPolicy | None = None,
        labels: Mapping[str, str] | None = None,
        *,
        model: str = "",
    ) -> SessionInfo:
        """Create a session; without a policy it gets the server's default.

        ``model`` is the model the agent calls with the session's context
        (e.g. "gemini-2.5-flash"); the server refuses one it has no profile
        of (InvalidArgumentError naming "model"). Not retried: after a lost
        answer, ALREADY_EXISTS could not tell our session from someone else's.
        """
        request = requests.create_session(session_id, policy, labels, model)
        return decode.session(await self._unary(self._stub.CreateSession, request, retry=False))

    async def get_session(self, session_id: str) -> SessionInfo:
        request = pb.GetSessionRequest(session_id=session_id)
        return decode.session(await self._unary(self._stub.GetSession, request, retry=True))

    def list_sessions(
        self, *, label_filter: Mapping[str, str] | None = None, page_size: int = 0
    ) -> AsyncIterator[SessionInfo]:
        """Every session having all of ``label_filter``, in id order, page after page."""
        request = pb.ListSessionsRequest(page_size=page_size, label_filter=dict(label_filter or {}))

        async def fetch(token: str) -> tuple[Iterable[SessionInfo], str]:
            request.page_token = token
            page = await self._unary(self._stub.ListSessions, request, retry=True)
            return [decode.session(s) for s in page.sessions], page.next_page_token

        return _paged(fetch)

    async def update_session(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | Keep | None = KEEP,
        labels: Mapping[str, str] | Keep = KEEP,
        model: str | Keep = KEEP,
        expected_version: int | None = None,
    ) -> SessionInfo:
        """Replace the session's policy, labels and/or model; only the ones passed change.

        ``policy=None`` removes the policy, ``model=""`` the model. With
        ``expected_version`` it fails with FailedPreconditionError unless the
        session is at that version. Not retried: every update moves the
        version on, so a repeat is not a no-op.
        """
        request = requests.update_session(session_id, policy, labels, expected_version, model)
        return decode.session(await self._unary(self._stub.UpdateSession, request, retry=False))

    async def delete_session(self, session_id: str) -> None:
        """Delete a session and its whole log. Not retried: a repeat would report NOT_FOUND."""
        request = pb.DeleteSessionRequest(session_id=session_id)
        await self._unary(self._stub.DeleteSession, request, retry=False)

    def session(self, session_id: str) -> SessionHandle:
        """A handle on one session's log; makes no call."""
        return SessionHandle(self, session_id)

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        roles: Iterable[Role] = (),
        include_active: bool = False,
        since: datetime | None = None,
        until: datetime | None = None,
        page_size: int = 0,
        timeout_s: float | None = None,
    ) -> AsyncIterator[SearchHit]:
        """Full-text search over archived events (and the active ones with ``include_active``).

        Every session unless ``session_id``; best hits first, page after page.
        ``timeout_s`` (default: the client's) bounds each page's call, retries included.
        """
        request = requests.search(query, session_id, roles, include_active, since, until, page_size)

        async def fetch(token: str) -> tuple[Iterable[SearchHit], str]:
            request.page_token = token
            page = await self._unary(
                self._stub.SearchEvents, request, retry=True, timeout_s=timeout_s
            )
            return [decode.hit(h) for h in page.hits], page.next_page_token

        return _paged(fetch)


class SessionHandle:
    """One session's log: append, stream, read the context, compact, watch, list, search."""

    def __init__(self, client: AsyncClient, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    async def get(self) -> SessionInfo:
        return await self._client.get_session(self.session_id)

    async def append(
        self,
        events: Iterable[Event],
        *,
        expected_version: int | None = None,
        create_if_missing: bool = False,
        label_updates: Sequence[LabelUpdate] = (),
        usage: ModelUsage | None = None,
    ) -> AppendResult:
        """Store a batch in one transaction; compacts if the session's trigger fires.

        Events without an id get a uuid4 hex one here, before the first
        attempt, so a retry after a lost answer stores nothing twice.
        ``usage`` (what the provider reported for the call made with an
        earlier context) calibrates the session's token estimates; when the
        server cannot take it, ``AppendResult.usage_ignored_reason`` says why.
        """
        request = requests.append(
            self.session_id,
            requests.with_ids(events),
            expected_version,
            create_if_missing,
            label_updates,
            usage,
        )
        client = self._client
        return decode.append_result(
            await client._unary(client._stub.AppendEvents, request, retry=True)
        )

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[EventStream]:
        """Open the fast path: ``send()`` appends, iterate for acks, errors and compactions.

        Leaving the block cancels the call; ``close()`` and drain first to
        wait for the acks of everything sent.
        """
        client = self._client
        call = client._stub.StreamEvents(None, metadata=client._metadata)
        try:
            yield EventStream(call, self.session_id)
        finally:
            call.cancel()

    async def context(self, *, format: ContextFormat | None = None) -> SessionContext:
        """The active window to send to the model, in log order.

        With ``format`` the window also comes rendered as that provider's
        request fragment (``rendered_json``). A window too large for one
        answer comes without its events' content (and unrendered); it is then
        read in byte-bounded pages (ListEvents), put together and rendered
        here, with the server's own renderer.
        """
        client = self._client
        request = requests.context(self.session_id, format)
        for _ in range(_WHOLE_WINDOW_TRIES):
            answer = await client._unary(client._stub.GetContext, request, retry=True)
            window = decode.context(answer)
            if not answer.content_omitted:
                return window
            if answer.events_omitted:  # too many to list: nothing to compare the pages with
                listed = tuple([e async for e in self.events(active_only=True)])
                again = await client._unary(client._stub.GetContext, request, retry=True)
                if (again.version, again.cache_prefix_id) == (
                    answer.version,
                    answer.cache_prefix_id,
                ):
                    break  # no write in between: the pages are that window
                continue
            listed = tuple([e async for e in self.events(active_only=True)])
            if window.shows(listed):
                break  # the same window: nothing changed in between
        return decode.read_in_parts(window, listed, format)

    async def compact(
        self,
        policy: CompactionPolicy | None = None,
        *,
        force: bool = False,
        expected_version: int | None = None,
        timeout_s: float | None = None,
    ) -> CompactionResult:
        """Run a compaction pass now and wait for it; ``policy`` overrides the session's.

        Without ``force`` the trigger decides. A summarizing pass may take a
        while: ``timeout_s`` (default: the client's) also bounds the summarizer.
        Not retried: a lost answer may hide a pass that landed.
        """
        client = self._client
        request = requests.compact(self.session_id, policy, force, expected_version)
        response = await client._unary(
            client._stub.Compact, request, retry=False, timeout_s=timeout_s
        )
        return decode.compaction(response.result)

    async def restore(
        self,
        compaction_id: str = "",
        *,
        expected_version: int | None = None,
        pause_auto_compaction: bool = False,
    ) -> CompactionResult:
        """Undo the session's newest compaction still standing (``compaction_id`` "": that one).

        What it archived is active again in place, what it cleared uncleared,
        the summary turn it inserted archived; nothing is deleted. Naming an
        older compaction fails with FailedPreconditionError naming the one to
        restore first. ``pause_auto_compaction`` keeps the trigger from
        compacting the restored window again until the policy is next set.
        Not retried: a lost answer may hide a restore that landed.
        """
        client = self._client
        request = pb.RestoreCompactionRequest(
            session_id=self.session_id,
            compaction_id=compaction_id,
            expected_version=expected_version or 0,
            pause_auto_compaction=pause_auto_compaction,
        )
        response = await client._unary(client._stub.RestoreCompaction, request, retry=False)
        return decode.compaction(response.result)

    def compactions(self, *, page_size: int = 0) -> AsyncIterator[CompactionRecord]:
        """The session's compaction history, newest first, page after page."""
        client = self._client
        request = pb.ListCompactionsRequest(session_id=self.session_id, page_size=page_size)

        async def fetch(token: str) -> tuple[Iterable[CompactionRecord], str]:
            request.page_token = token
            page = await client._unary(client._stub.ListCompactions, request, retry=True)
            for listed in page.compactions:
                if decode.ids_omitted(listed):  # too many ids for a page: read in parts
                    decode.with_ids(listed, await self._ids_of(listed.compaction_id))
            records = [decode.record(self.session_id, c) for c in page.compactions]
            return records, page.next_page_token

        return _paged(fetch)

    async def _ids_of(self, compaction_id: str) -> list[session_pb2.Compaction]:
        """The pages of one compaction's ids (ListCompactions ``ids_of``)."""
        client = self._client
        request = pb.ListCompactionsRequest(session_id=self.session_id, ids_of=compaction_id)
        pages = []
        while True:
            page = await client._unary(client._stub.ListCompactions, request, retry=True)
            pages += list(page.compactions)
            if not page.next_page_token:
                return pages
            request.page_token = page.next_page_token

    def watch(self) -> Watch:
        """Every compaction result of the session as it lands, and Missed notices.

        The server subscribes when the call arrives; results that landed
        before are not replayed. Not retried: a silent reconnect would hide
        lost results.
        """
        client = self._client
        request = pb.WatchSessionRequest(session_id=self.session_id)
        return Watch(client._stub.WatchSession(request, metadata=client._metadata))

    def events(self, *, active_only: bool = False, page_size: int = 0) -> AsyncIterator[Event]:
        """The whole log in log order, archived events included unless ``active_only``."""
        client = self._client
        request = pb.ListEventsRequest(
            session_id=self.session_id, active_only=active_only, page_size=page_size
        )

        async def fetch(token: str) -> tuple[Iterable[Event], str]:
            request.page_token = token
            page = await client._unary(client._stub.ListEvents, request, retry=True)
            return decode.events(page.events), page.next_page_token

        return _paged(fetch)

    def search(
        self,
        query: str,
        *,
        roles: Iterable[Role] = (),
        include_active: bool = False,
        since: datetime | None = None,
        until: datetime | None = None,
        page_size: int = 0,
        timeout_s: float | None = None,
    ) -> AsyncIterator[SearchHit]:
        """Full-text search of this session; see ``AsyncClient.search``."""
        return self._client.search(
            query,
            session_id=self.session_id,
            roles=roles,
            include_active=include_active,
            since=since,
            until=until,
            page_size=page_size,
            timeout_s=timeout_s,
        )
