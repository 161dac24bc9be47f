"""The asyncio client's open streaming calls: ``EventStream`` (StreamEvents) and ``Watch``.

Neither is retried: a stream that breaks is reported, never silently
reopened, because a reopened watch would hide the results it missed. To
re-send a batch after a broken stream without storing anything twice, give
its events ids first (``with_ids``) and re-send those same events.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

import grpc

from sidecar.client import decode, requests
from sidecar.client.errors import ClientError, error_from_rpc
from sidecar.client.results import Missed, StreamMessage
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import CompactionResult, Event, ModelUsage

T = TypeVar("T")


class EventStream:
    """An open StreamEvents call on one session.

    Sends and reads are independent: send from one task and iterate in
    another, or send a few and then read their acks. A bad request comes back
    as ``RequestFailed`` and the stream goes on; an error of the whole call
    (auth, server gone) is raised from the iteration as ClientError.
    """

    def __init__(
        self,
        call: grpc.aio.StreamStreamCall[pb.StreamEventsRequest, pb.StreamEventsResponse],
        session_id: str,
    ) -> None:
        self._call = call
        self.session_id = session_id
        self._ended: grpc.aio.AioRpcError | None = None  # the status the call ended with
        call.add_done_callback(self._on_done)

    def _on_done(self, call: grpc.aio.Call) -> None:
        """Keep the status the call ended with, as it ends.

        grpc.aio replaces it with ``INTERNAL: Internal error from Core`` when
        a write was under way as the server ended the call (grpc/grpc#36066),
        so a stream the server refused (no token, too many streams) would
        report that instead of the server's own status. Read here, it is
        still the server's.
        """
        if self._ended is None:  # the first: a replaced status ends the call again
            self._ended = _ended_with(call)

    def _error(self, exc: grpc.RpcError) -> ClientError:
        return error_from_rpc(self._ended or exc)

    async def send(
        self,
        events: Iterable[Event],
        *,
        request_id: str | None = None,
        expected_version: int | None = None,
        create_if_missing: bool = False,
        usage: ModelUsage | None = None,
    ) -> str:
        """Send one append; returns its request id (a fresh uuid4 hex if none is given).

        Events without an id get one here, as in ``SessionHandle.append``; the
        ack returns them as stored. ``usage`` is as in ``SessionHandle.append``.
        """
        rid = request_id or uuid.uuid4().hex
        request = requests.stream_append(
            rid,
            self.session_id,
            requests.with_ids(events),
            expected_version,
            create_if_missing,
            usage,
        )
        try:
            await self._call.write(request)
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        except asyncio.InvalidStateError as exc:  # the call had ended, or was closed for writing
            if self._ended is None:
                raise ClientError(grpc.StatusCode.FAILED_PRECONDITION, str(exc)) from exc
            raise error_from_rpc(self._ended) from exc
        return rid

    async def close(self) -> None:
        """Send no more; the iteration ends once everything sent is answered."""
        await self._call.done_writing()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> StreamMessage:
        try:
            message = await self._call.read()
        except grpc.RpcError as exc:
            raise self._error(exc) from exc
        if not isinstance(message, pb.StreamEventsResponse):  # end of stream
            raise StopAsyncIteration
        return decode.stream_message(message)


class Watch:
    """An open WatchSession call: an async iterator of ``CompactionResult | Missed``.

    Use it as an async context manager (or call ``cancel()``) to end the call
    when done; an iteration left early otherwise ends it only when collected.
    """

    def __init__(
        self, call: grpc.aio.UnaryStreamCall[pb.WatchSessionRequest, pb.WatchSessionResponse]
    ) -> None:
        self._call = call

    async def __aenter__(self) -> Watch:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cancel()

    def cancel(self) -> None:
        self._call.cancel()

    async def started(self) -> None:
        """Wait until the server has subscribed: no result landing after this is missed."""
        try:
            await self._call.wait_for_connection()
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> CompactionResult | Missed:
        try:
            message = await self._call.read()
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc
        if not isinstance(message, pb.WatchSessionResponse):  # end of stream
            raise StopAsyncIteration
        return decode.watch_update(message)


def _ended_with(done: grpc.aio.Call) -> grpc.aio.AioRpcError | None:
    """The error a call that has just ended ended with; None for OK, or if it cannot be read.

    A done call's status is already there, so its accessors return without
    waiting and are run here to completion, outside the loop.
    """
    call: Any = done  # grpc.aio's calls have debug_error_string; its abstract Call does not
    try:
        code = _at_once(call.code())
        if code == grpc.StatusCode.OK:
            return None
        return grpc.aio.AioRpcError(
            code,
            _at_once(call.initial_metadata()),
            _at_once(call.trailing_metadata()),
            _at_once(call.details()),
            _at_once(call.debug_error_string()),
        )
    except Exception:  # a grpc whose accessors wait: keep what the call reports
        return None


def _at_once(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that completes without suspending."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the coroutine suspended")
