"""The blocking client: ``Client`` and ``SyncSessionHandle``, the same surface as the asyncio one.

Built on a plain (sync) gRPC channel, not on an event loop per call, so it
works in threads and inside programs that already run a loop elsewhere. It
shares request building, decoding, errors and the retry rule with
``sidecar.client.aio``. Streaming is offered in its simple form: ``stream()``
takes an iterable of batches and yields the answers, ``watch()`` is a
generator; closing either generator cancels its call.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import grpc

from sidecar.client import decode, requests
from sidecar.client.channel import Options, Tls, auth_metadata, channel_options
from sidecar.client.errors import error_from_rpc
from sidecar.client.requests import KEEP, Batch, Keep
from sidecar.client.results import (
    AppendResult,
    Missed,
    SearchHit,
    SessionContext,
    SessionInfo,
    StreamMessage,
)
from sidecar.client.retry import RetryPolicy, retry_sync
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


def _paged(fetch: Callable[[str], tuple[Iterable[T], str]]) -> Iterator[T]:
    """Every item of every page: ``fetch(page_token)`` returns a page and the next token."""
    token = ""
    while True:
        items, token = fetch(token)
        yield from items
        if not token:
            return


def _cancel(call: Any) -> None:
    """End a streaming call (typed loosely: the stubs leave ``Call.cancel`` untyped)."""
    call.cancel()


# Reads of a window too large for one answer, before taking the newest pages as they are.
_WHOLE_WINDOW_TRIES = 3


class Client:
    """A blocking connection to the compaction sidecar; see ``AsyncClient`` for the options.

    ``interceptors`` are sync gRPC client interceptors. Use it as a context
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
            channel = grpc.insecure_channel(address, options=opts)
        else:
            channel = grpc.secure_channel(address, tls.credentials(), options=opts)
        self._channel = channel
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        self._stub = pb_grpc.CompactionServiceStub(channel)
        self._metadata = auth_metadata(token)
        self.default_timeout = default_timeout
        self.retry_policy = retry_policy or RetryPolicy(retries=retries)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel; open streams and watches end."""
        self._channel.close()

    def _unary(
        self,
        method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        *,
        retry: bool,
        timeout_s: float | None = None,
    ) -> Resp:
        """One call, retried on UNAVAILABLE when ``retry`` (the caller vouches it is safe)."""

        def attempt(time_left: float | None) -> Resp:
            return method(request, timeout=time_left, metadata=self._metadata)

        budget = self.default_timeout if timeout_s is None else timeout_s
        try:
            if retry:
                return retry_sync(attempt, self.retry_policy, budget)
            return attempt(budget)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    # -- sessions ---------------------------------------------------------

    def create_session(
        self,
        session_id: str,
        policy: CompactionPolicy | None = None,
        labels: Mapping[str, str] | None = None,
        *,
        model: str = "",
    ) -> SessionInfo:
        """Create a session (with ``model``, if given); no policy: the server's default.

        Not retried.
        """
        request = requests.create_session(session_id, policy, labels, model)
        return decode.session(self._unary(self._stub.CreateSession, request, retry=False))

    def get_session(self, session_id: str) -> SessionInfo:
        request = pb.GetSessionRequest(session_id=session_id)
        return decode.session(self._unary(self._stub.GetSession, request, retry=True))

    def list_sessions(
        self, *, label_filter: Mapping[str, str] | None = None, page_size: int = 0
    ) -> Iterator[SessionInfo]:
        """Every session having all of ``label_filter``, in id order, page after page."""
        request = pb.ListSessionsRequest(page_size=page_size, label_filter=dict(label_filter or {}))

        def fetch(token: str) -> tuple[Iterable[SessionInfo], str]:
            request.page_token = token
            page = self._unary(self._stub.ListSessions, request, retry=True)
            return [decode.session(s) for s in page.sessions], page.next_page_token

        return _paged(fetch)

    def update_session(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | Keep | None = KEEP,
        labels: Mapping[str, str] | Keep = KEEP,
        model: str | Keep = KEEP,
        expected_version: int | None = None,
    ) -> SessionInfo:
        """Replace the session's policy, labels and/or model; only the ones passed change.

        Not retried.
        """
        request = requests.update_session(session_id, policy, labels, expected_version, model)
        return decode.session(self._unary(self._stub.UpdateSession, request, retry=False))

    def delete_session(self, session_id: str) -> None:
        """Delete a session and its whole log. Not retried."""
        request = pb.DeleteSessionRequest(session_id=session_id)
        self._unary(self._stub.DeleteSession, request, retry=False)

    def session(self, session_id: str) -> SyncSessionHandle:
        """A handle on one session's log; makes no call."""
        return SyncSessionHandle(self, session_id)

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
    ) -> Iterator[SearchHit]:
        """Full-text search over archived (and optionally active) events, best first.

        ``timeout_s`` (default: the client's) bounds each page's call, retries included.
        """
        request = requests.search(query, session_id, roles, include_active, since, until, page_size)

        def fetch(token: str) -> tuple[Iterable[SearchHit], str]:
            request.page_token = token
            page = self._unary(self._stub.SearchEvents, request, retry=True, timeout_s=timeout_s)
            return [decode.hit(h) for h in page.hits], page.next_page_token

        return _paged(fetch)


class SyncSessionHandle:
    """One session's log, blocking; see ``sidecar.client.aio.SessionHandle``."""

    def __init__(self, client: Client, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    def get(self) -> SessionInfo:
        return self._client.get_session(self.session_id)

    def append(
        self,
        events: Iterable[Event],
        *,
        expected_version: int | None = None,
        create_if_missing: bool = False,
        label_updates: Sequence[LabelUpdate] = (),
        usage: ModelUsage | None = None,
    ) -> AppendResult:
        """Store a batch; events get their ids before the first attempt, so retries are safe.

        ``usage`` calibrates the session's token estimates, as in ``SessionHandle.append``.
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
        return decode.append_result(client._unary(client._stub.AppendEvents, request, retry=True))

    def stream(
        self, batches: Iterable[Sequence[Event] | Batch], *, create_if_missing: bool = False
    ) -> Generator[StreamMessage, None, None]:
        """Append each batch over one StreamEvents call; yield acks, errors and compactions.

        The n-th batch (from 0) is sent with request id ``str(n)``, so an
        ``Ack`` or ``RequestFailed`` names its batch. A batch is a sequence
        of events, or a ``Batch(events, usage)`` to report a model call's
        usage with it. ``batches`` is consumed by gRPC as the stream goes;
        the generator ends once every batch is answered. Closing the
        generator early cancels the call.
        """
        session_id = self.session_id

        def outgoing() -> Iterator[pb.StreamEventsRequest]:
            for n, item in enumerate(batches):
                batch = item if isinstance(item, Batch) else Batch(item)
                yield requests.stream_append(
                    str(n),
                    session_id,
                    requests.with_ids(batch.events),
                    None,
                    create_if_missing,
                    batch.usage,
                )

        client = self._client
        call = client._stub.StreamEvents(outgoing(), metadata=client._metadata)
        try:
            for message in call:
                yield decode.stream_message(message)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        finally:
            _cancel(call)

    def context(self, *, format: ContextFormat | None = None) -> SessionContext:
        """The active window to send to the model, in log order, rendered in ``format`` if given.

        See ``SessionHandle.context``: a window too large for one answer is
        read in byte-bounded pages, put together and rendered here.
        """
        client = self._client
        request = requests.context(self.session_id, format)
        for _ in range(_WHOLE_WINDOW_TRIES):
            answer = client._unary(client._stub.GetContext, request, retry=True)
            window = decode.context(answer)
            if not answer.content_omitted:
                return window
            if answer.events_omitted:  # too many to list: nothing to compare the pages with
                listed = tuple([e for e in self.events(active_only=True)])
                again = client._unary(client._stub.GetContext, request, retry=True)
                if (again.version, again.cache_prefix_id) == (
                    answer.version,
                    answer.cache_prefix_id,
                ):
                    break  # no write in between: the pages are that window
                continue
            listed = tuple(self.events(active_only=True))
            if window.shows(listed):
                break
        return decode.read_in_parts(window, listed, format)

    def compact(
        self,
        policy: CompactionPolicy | None = None,
        *,
        force: bool = False,
        expected_version: int | None = None,
        timeout_s: float | None = None,
    ) -> CompactionResult:
        """Run a compaction pass now and wait for it. Not retried."""
        client = self._client
        request = requests.compact(self.session_id, policy, force, expected_version)
        response = client._unary(client._stub.Compact, request, retry=False, timeout_s=timeout_s)
        return decode.compaction(response.result)

    def restore(
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
        response = client._unary(client._stub.RestoreCompaction, request, retry=False)
        return decode.compaction(response.result)

    def compactions(self, *, page_size: int = 0) -> Iterator[CompactionRecord]:
        """The session's compaction history, newest first, page after page."""
        client = self._client
        request = pb.ListCompactionsRequest(session_id=self.session_id, page_size=page_size)

        def fetch(token: str) -> tuple[Iterable[CompactionRecord], str]:
            request.page_token = token
            page = client._unary(client._stub.ListCompactions, request, retry=True)
            for listed in page.compactions:
                if decode.ids_omitted(listed):  # too many ids for a page: read in parts
                    decode.with_ids(listed, self._ids_of(listed.compaction_id))
            records = [decode.record(self.session_id, c) for c in page.compactions]
            return records, page.next_page_token

        return _paged(fetch)

    def _ids_of(self, compaction_id: str) -> list[session_pb2.Compaction]:
        """The pages of one compaction's ids (ListCompactions ``ids_of``)."""
        client = self._client
        request = pb.ListCompactionsRequest(session_id=self.session_id, ids_of=compaction_id)
        pages = []
        while True:
            page = client._unary(client._stub.ListCompactions, request, retry=True)
            pages += list(page.compactions)
            if not page.next_page_token:
                return pages
            request.page_token = page.next_page_token

    def watch(self) -> Generator[CompactionResult | Missed, None, None]:
        """Every compaction result as it lands; blocks between results. Close to stop."""
        client = self._client
        request = pb.WatchSessionRequest(session_id=self.session_id)
        call = client._stub.WatchSession(request, metadata=client._metadata)
        try:
            for message in call:
                yield decode.watch_update(message)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        finally:
            _cancel(call)

    def events(self, *, active_only: bool = False, page_size: int = 0) -> Iterator[Event]:
        """The whole log in log order, archived events included unless ``active_only``."""
        client = self._client
        request = pb.ListEventsRequest(
            session_id=self.session_id, active_only=active_only, page_size=page_size
        )

        def fetch(token: str) -> tuple[Iterable[Event], str]:
            request.page_token = token
            page = client._unary(client._stub.ListEvents, request, retry=True)
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
    ) -> Iterator[SearchHit]:
        """Full-text search of this session; see ``Client.search``."""
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
