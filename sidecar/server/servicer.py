"""The CompactionService servicer: protobuf in, engine call, protobuf out.

Every handler converts its request to the model, calls the engine (or the
store for plain reads), and converts back. This is the gRPC surface: the
handlers live beside it, one module per concept (``sessions``, ``appends``
with ``stream_batches`` and ``streams``, ``context_answers``, ``history``);
Compact and WatchSession are here. A unary handler's error is logged and
answered here (``unary``); errors are mapped to status codes in
``status.py`` and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc
from google.rpc import code_pb2

from sidecar.engine.engine import SessionEngine
from sidecar.engine.watchers import Gone, Lagged
from sidecar.errors import InvalidArgument, LimitExceeded, SessionNotFound, StoreUnavailable
from sidecar.gen.compaction.v1 import (
    compaction_service_pb2 as pb,
)
from sidecar.gen.compaction.v1 import (
    compaction_service_pb2_grpc as pb_grpc,
)
from sidecar.gen.compaction.v1 import (
    session_pb2,
)
from sidecar.model import CompactionResult, Session
from sidecar.providers.fragments import Fragments
from sidecar.server import answers, convert, fields
from sidecar.server.appends import Appends
from sidecar.server.auth import TokenFile
from sidecar.server.context_answers import ContextAnswers
from sidecar.server.context_cache import ContextResponses, EventBlobs
from sidecar.server.decoding import Marker
from sidecar.server.fields import abort
from sidecar.server.history import History
from sidecar.server.inflight import InflightBudget
from sidecar.server.sessions import SessionHeaders
from sidecar.server.status import to_status
from sidecar.server.stream_batches import StreamBatches
from sidecar.server.streams import EventStream, Revoked
from sidecar.server.tenancy import Scope, current_scope

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")

# How often an idle long-lived call checks that its token is still in force (the token
# file itself is re-read at most once a second).
REVOCATION_CHECK_S = 0.5
WATCHED_SESSION_CHECK_S = 30.0
"""How often an idle WatchSession reads whether its session still exists: a deletion through
this server ends the watch at once, one through another replica by this check."""
REVOKED = "bearer token revoked: this call ended with it"

StreamKey = tuple[str | None, str]
"""What open long-lived calls are counted by: the caller's tenant (None without tenants) and
its connection's peer."""


_FAILURE_LEVELS = {code_pb2.INTERNAL: logging.ERROR, code_pb2.NOT_FOUND: logging.DEBUG}
"""How a failed call is logged: INFO, but a fault of ours is an ERROR and a session or
compaction not found is DEBUG (an answer, not news: the ADK adapter looks up the app's and
the user's state sessions on every call, and most agents have none)."""


def unary(
    handler: Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]],
) -> Callable[[Any, Req, grpc.aio.ServicerContext[Req, Resp]], Awaitable[Resp]]:
    """Map any error a unary handler raises to its status, with details."""

    @functools.wraps(handler)
    async def wrapped(
        self: Any, request: Req, context: grpc.aio.ServicerContext[Req, Resp]
    ) -> Resp:
        self.last_call = time.monotonic()
        try:
            return await handler(self, request, context)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            if not isinstance(exc, InvalidArgument):
                code = to_status(exc).code
                log.log(
                    _FAILURE_LEVELS.get(code, logging.INFO),
                    "%s failed: %s",
                    handler.__name__,
                    exc,
                    exc_info=code == code_pb2.INTERNAL,
                    extra={
                        "method": handler.__name__,
                        "code": code_pb2.Code.Name(code),
                        "session_id": getattr(request, "session_id", "") or None,
                    },
                )
            await abort(context, exc)
            raise  # unreachable: abort raises

    return wrapped


class CompactionServicer(pb_grpc.CompactionServiceServicer):
    """Serves the API over one SessionEngine."""

    def __init__(
        self,
        engine: SessionEngine,
        tokens: TokenFile | None = None,
        *,
        max_streams_per_connection: int = 100,
        cache_bytes: int = 32 << 20,
        max_message_bytes: int = 16 << 20,
        search_timeout_s: float = 5.0,
        max_inflight_bytes: int = 256 << 20,
    ) -> None:
        self.engine = engine
        self.inflight = InflightBudget(max_inflight_bytes)
        """What appends may hold at once, in bytes: every stream's and unary call's, let in
        fairly between tenants and between each tenant's connections (``inflight.py``)."""
        self.search_timeout_s = search_timeout_s
        """The longest one SearchEvents may take (a caller's shorter deadline wins)."""
        self.max_message_bytes = max_message_bytes
        """The server's send limit: answers are fitted within it (see ``answers``)."""
        self.store = engine.store
        self.tokens = tokens
        self.max_streams_per_connection = max_streams_per_connection
        self._streams: dict[StreamKey, int] = {}  # open long-lived calls per tenant and peer
        self.blobs = EventBlobs(cache_bytes // 4)
        self.fragments = Fragments(cache_bytes // 2 - cache_bytes // 4)
        """Renderings' encoded blocks per event and each format's last window state (what an
        append's rendering starts from): they share the event wire bytes' half."""
        self.contexts = ContextResponses(cache_bytes - cache_bytes // 2)
        self.last_call = time.monotonic()
        """When the last unary call or stream batch came in (``time.monotonic``)."""
        self.appends = Appends(engine, self.contexts, self.blobs)
        """AppendEvents' and StreamEvents' appends, which keep the kept answers true."""
        self.stream_batches = StreamBatches(engine, self.appends, max_message_bytes)
        """StreamEvents' answers to each batch of requests that arrived together."""
        self.context_answers = ContextAnswers(
            engine,
            blobs=self.blobs,
            fragments=self.fragments,
            contexts=self.contexts,
            max_message_bytes=max_message_bytes,
        )
        """GetContext's answers, kept in the caches above or built."""
        self.context_reads = self.context_answers.reads
        """GetContext answers by how they were made: ``kept`` or ``built``."""
        self.history = History(
            engine,
            self.contexts,
            max_message_bytes=max_message_bytes,
            search_timeout_s=search_timeout_s,
        )
        """The log's handlers: compaction records, restores, events and search."""
        self.sessions = SessionHeaders(engine, self.contexts)
        """The session headers' handlers: create, get, list, update, delete."""

    def drop_caches(self) -> None:
        """Forget the kept GetContext answers and events' wire bytes."""
        self.blobs.clear()
        self.fragments.clear()
        self.contexts.clear()

    def _open_stream(self, context: grpc.aio.ServicerContext[Any, Any]) -> StreamKey:
        """Count a long-lived call against its tenant's on its connection; LimitExceeded past
        the cap.

        HTTP/2's own stream limit would queue the extra calls on the client
        without a word; a clear RESOURCE_EXHAUSTED naming the limit is better.
        Counted per tenant as well: where two tenants' calls share what grpc
        shows as one connection (every client of a Unix socket is the peer
        ``unix:``; a proxy's one connection), one tenant's streams never use
        up the other's allowance. Returns the key, for ``_close_stream``.
        """
        key = (self.scope_of(context).tenant, context.peer())
        open_now = self._streams.get(key, 0)
        if open_now >= self.max_streams_per_connection:
            raise LimitExceeded(
                "max_streams_per_connection",
                f"{open_now} streams already open on this connection,"
                f" the limit is {self.max_streams_per_connection}",
            )
        self._streams[key] = open_now + 1
        return key

    def _close_stream(self, key: StreamKey) -> None:
        left = self._streams[key] - 1
        if left:
            self._streams[key] = left
        else:
            del self._streams[key]

    def revoked(self, context: grpc.aio.ServicerContext[Any, Any], scope: Scope) -> bool:
        """Whether an open call's token is no longer in force (or now names another tenant).

        Long-lived calls ask this before every write they make and every
        result they deliver, and at least every ``REVOCATION_CHECK_S`` while
        idle, so removing a token from the file ends its open calls too.
        """
        if self.tokens is None:
            return False
        # One lookup; a single-tenant token's tenant is None, as is its scope's.
        tenant = self.tokens.tenant_of(context.invocation_metadata())
        return tenant is False or tenant != scope.tenant

    def scope_of(self, context: grpc.aio.ServicerContext[Any, Any]) -> Scope:
        """The caller's namespace: its tenant's in multi-tenant mode, else every session.

        The BearerTokenInterceptor sets it from the call's one token lookup,
        before the handler runs; without token authentication it is every session.
        """
        return current_scope.get()

    # -- sessions ---------------------------------------------------------

    @unary
    async def CreateSession(
        self, request: pb.CreateSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> session_pb2.Session:
        return await self.sessions.create_session(request)

    @unary
    async def GetSession(
        self, request: pb.GetSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> session_pb2.Session:
        return await self.sessions.get_session(request)

    @unary
    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListSessionsResponse:
        return await self.sessions.list_sessions(request)

    @unary
    async def UpdateSession(
        self, request: pb.UpdateSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> session_pb2.Session:
        return await self.sessions.update_session(request)

    @unary
    async def DeleteSession(
        self, request: pb.DeleteSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.DeleteSessionResponse:
        return await self.sessions.delete_session(request)

    # -- appends ----------------------------------------------------------

    @unary
    async def AppendEvents(
        self, request: pb.AppendEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.AppendEventsResponse:
        tenant = self.scope_of(context).tenant
        async with self.inflight.holding(request.ByteSize(), context.peer(), tenant):
            result = await self.appends.append(
                request.session_id,
                request.events,
                request.expected_version,
                request.create_if_missing,
                request.label_updates,
                fields.usage_in(request),
            )
            return answers.ack_out(result, pb.AppendEventsResponse(), self.max_message_bytes)

    async def StreamEvents(
        self,
        request_iterator: AsyncIterator[pb.StreamEventsRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[pb.StreamEventsResponse]:
        """Appends in order; acks, per-request errors and background results on one stream.

        Memory stays bounded in bytes: a stream reads ahead at most 4 MiB of
        requests and queues at most 4 MiB of answers (one message at least),
        and every request and answer counts against the server's in-flight
        budget (``--max-inflight-mib``). Past any of them the stream stops
        reading and HTTP/2 flow control pushes back on the client (``streams.py``).
        """
        # Set before the tasks below are made, so they inherit it.
        scope = self.scope_of(context)
        current_scope.set(scope)
        try:
            opened = self._open_stream(context)
        except LimitExceeded as exc:
            await abort(context, exc)
            raise  # unreachable: abort raises
        stream = EventStream(
            answer=self._answer_batch,
            watch=lambda session_id: self.engine.watch(fields.stored(session_id)),
            revoked=functools.partial(self.revoked, context, scope),
            budget=self.inflight,
            max_message_bytes=self.max_message_bytes,
            idle_check_s=REVOCATION_CHECK_S,
            connection=context.peer(),
            tenant=scope.tenant,
        )
        try:
            # Closed here, not when collected: its tasks end and its budget returns at once.
            async with contextlib.aclosing(stream.run(request_iterator)) as outs:
                async for out in outs:
                    yield out
        except Revoked:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, REVOKED)
        finally:
            self._close_stream(opened)

    async def _answer_batch(
        self, requests: Sequence[pb.StreamEventsRequest | Marker]
    ) -> list[pb.StreamEventsResponse]:
        self.last_call = time.monotonic()  # a stream's batch is a call, for the idle clock
        return await self.stream_batches.answer(requests)

    # -- context and compaction -------------------------------------------

    @unary
    async def GetContext(
        self, request: pb.GetContextRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetContextResponse:
        return await self.context_answers.get_context(request)

    @unary
    async def Compact(
        self, request: pb.CompactRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.CompactResponse:
        policy = convert.policy_in(request.policy) if request.HasField("policy") else None
        remaining = context.time_remaining()
        session_id = fields.stored(request.session_id)
        expected = fields.optional_version(request.expected_version)
        self.contexts.forget(session_id)
        result = await self.engine.compact(
            session_id,
            policy=policy,
            force=request.force,
            expected_version=expected,
            deadline_s=remaining,
        )
        # The result carries the whole window: built off the loop (see engine.window_work).
        return await self.engine.window_work.run(self._compact_answer, result)

    def _compact_answer(self, result: CompactionResult) -> pb.CompactResponse:
        out = pb.CompactResponse()
        answers.result_in(result, out.result, out, self.max_message_bytes)
        return out

    async def WatchSession(
        self, request: pb.WatchSessionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.WatchSessionResponse]:
        current_scope.set(self.scope_of(context))
        try:
            session_id = fields.stored(request.session_id)
            session = await self.store.get_session(session_id)
            opened = self._open_stream(context)
        except Exception as exc:
            await abort(context, exc)
            raise  # unreachable: abort raises
        watcher = self.engine.watch(session_id)
        scope = current_scope.get()
        loop = asyncio.get_running_loop()
        checked = loop.time()
        try:
            # Headers now, so a client knows the watch is in place before the first result.
            await context.send_initial_metadata(())
            while True:
                try:
                    update: CompactionResult | Lagged | Gone = await asyncio.wait_for(
                        watcher.next(), REVOCATION_CHECK_S
                    )
                except TimeoutError:
                    if self.revoked(context, scope):
                        await context.abort(grpc.StatusCode.UNAUTHENTICATED, REVOKED)
                    if loop.time() - checked < WATCHED_SESSION_CHECK_S:
                        continue
                    checked = loop.time()  # deleted through another replica?
                    if await self._still_there(session):
                        continue
                    update = Gone()
                if isinstance(update, Gone):  # the session was deleted: the watch ends
                    await abort(context, SessionNotFound(session_id))
                    return  # unreachable: abort raises
                if self.revoked(context, scope):
                    await context.abort(grpc.StatusCode.UNAUTHENTICATED, REVOKED)
                out = pb.WatchSessionResponse()
                if isinstance(update, Lagged):
                    out.missed = update.missed
                else:
                    answers.result_in(update, out.compaction, out, self.max_message_bytes)
                yield out
        finally:
            watcher.close()
            self._close_stream(opened)

    async def _still_there(self, watched: Session) -> bool:
        """Whether the watched session is still the one the watch began on (not deleted, nor
        created again); a store that does not answer is not taken for a deletion."""
        try:
            session = await self.store.get_session(watched.session_id)
        except SessionNotFound:
            return False
        except StoreUnavailable:
            return True
        return session.incarnation == watched.incarnation

    # -- the log ------------------------------------------------------------

    @unary
    async def ListCompactions(
        self, request: pb.ListCompactionsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListCompactionsResponse:
        return await self.history.list_compactions(request)

    @unary
    async def RestoreCompaction(
        self, request: pb.RestoreCompactionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.RestoreCompactionResponse:
        return await self.history.restore_compaction(request)

    @unary
    async def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ListEventsResponse:
        return await self.history.list_events(request)

    @unary
    async def SearchEvents(
        self, request: pb.SearchEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SearchEventsResponse:
        return await self.history.search_events(request, context)
