"""The asyncio client's open streaming calls: ``EventStream`` (StreamEvents) and ``Watch``.

Neither is retried: a stream that breaks is reported, never silently
reopened, because a reopened watch would hide the results it missed. To
re-send a batch after a broken stream without storing anything twice, give
its events ids first (``with_ids``) and re-send those same events.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from types import TracebackType

import grpc

from sidecar.client import decode, requests
from sidecar.client.errors import error_from_rpc
from sidecar.client.results import Missed, StreamMessage
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import CompactionResult, Event, ModelUsage


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
            raise error_from_rpc(exc) from exc
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
            raise error_from_rpc(exc) from exc
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
