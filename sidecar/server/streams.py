"""StreamEvents' plumbing: a stream's read-ahead and its answers, bounded in bytes.

Each stream runs three tasks: ``receive`` reads requests off the call into
the inbox, ``read`` answers what has arrived as one batch (``stream_batches``:
folded, sessions together) and queues the answers,
and the call's own loop writes them out; a forwarder per session appended
to relays that session's compaction results. What sits between them is
bounded in bytes as well as in messages:

- the inbox takes requests while it holds less than ``STREAM_READ_AHEAD_BYTES``
  (and ``STREAM_READ_AHEAD`` of them), the outgoing queue answers while it holds
  less than ``STREAM_QUEUE_BYTES`` (and ``STREAM_QUEUE_SIZE``): each at most its
  bound plus one message, so a message of any size gets through;
- a batch is answered only while the outgoing queue has room, so a client
  that stops reading stops the stream answering, then reading;
- every request read counts against the server's in-flight budget
  (``inflight.py``, ``--max-inflight-mib``) until its answer is produced, and
  every answer until it is written; past the budget a request waits its turn
  fairly between tenants, then between the tenant's connections.

Past any of them the stream stops reading: a client that does not read its
answers stops the server from reading its requests, and HTTP/2 flow control
(with the fixed window of ``TRANSPORT_OPTIONS``) holds the rest on the
client. Nothing is buffered beyond them: a stream holds at most its inbox,
one batch being answered, its outgoing queue, the answer being written, and
the one request it has read while that waits for the budget.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

from sidecar.engine.watchers import Gone, Lagged, Watcher
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.server import answers
from sidecar.server.decoding import Marker
from sidecar.server.inflight import InflightBudget

T = TypeVar("T")

Request = pb.StreamEventsRequest | Marker
Answerer = Callable[[list[Request]], Awaitable[list[pb.StreamEventsResponse]]]

# Per stream: requests read ahead (enough to fold and group-commit a burst of small
# ones), answers queued for a slow reader, sessions whose results are relayed, and
# what grpc itself may read ahead.
STREAM_READ_AHEAD = 64
STREAM_READ_AHEAD_BYTES = 4 << 20
STREAM_QUEUE_SIZE = 256
STREAM_QUEUE_BYTES = 4 << 20
STREAM_MAX_WATCHED_SESSIONS = 256
STREAM_WINDOW_BYTES = 256 << 10

TRANSPORT_OPTIONS: tuple[tuple[str, int], ...] = (
    # grpc's BDP probing grows every stream's HTTP/2 window to what the link can carry
    # (tens of MB per stream on loopback), and grpc buffers that much for a stream the
    # servicer has stopped reading: memory no bound here would see. A fixed window
    # keeps what the transport reads ahead of a stream to STREAM_WINDOW_BYTES (a
    # request being read still gets a window of its whole size).
    ("grpc.http2.bdp_probe", 0),
    ("grpc.http2.lookahead_bytes", STREAM_WINDOW_BYTES),
)
"""grpc server options the bounds above rely on."""


class Revoked(Exception):
    """The stream's token is no longer in force: the call ends (UNAUTHENTICATED)."""


class ByteQueue(Generic[T]):
    """A FIFO that takes items while it holds fewer than ``max_items`` and ``max_bytes``.

    The item that crosses the byte bound is taken whole, so an empty queue
    takes one item of any size; the queue holds at most ``max_bytes`` plus
    one item. ``get`` returns None once the queue is closed and drained.
    Waiting is cancel-safe: an item is added or taken only by a waiter that
    resumed.
    """

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.deque[tuple[T, int]] = collections.deque()
        self._closed = False
        self._changed = asyncio.Event()
        self._waiting = 0  # tasks in room() or get(): with none, a change wakes nobody

    def __len__(self) -> int:
        return len(self._items)

    def _notify(self) -> None:
        if self._waiting:
            self._changed.set()
            self._changed = asyncio.Event()

    async def _wait(self) -> None:
        self._waiting += 1
        try:
            await self._changed.wait()
        finally:
            self._waiting -= 1

    def has_room(self) -> bool:
        return len(self._items) < self.max_items and self.bytes < self.max_bytes

    async def room(self) -> None:
        """Wait until the queue takes another item."""
        while not self.has_room():
            await self._wait()

    def put_nowait(self, item: T, size: int) -> None:
        """Add an item of ``size`` bytes; the caller waited for ``room``."""
        self._items.append((item, size))
        self.bytes += size
        self._notify()

    async def put(self, item: T, size: int) -> None:
        await self.room()
        self.put_nowait(item, size)

    async def get(self) -> tuple[T, int] | None:
        """The oldest item and its size, waiting for one; None once closed and drained."""
        while not self._items:
            if self._closed:
                return None
            await self._wait()
        return self.get_nowait()

    def get_nowait(self) -> tuple[T, int]:
        """The oldest item and its size; the caller saw the queue was not empty."""
        item = self._items.popleft()
        self.bytes -= item[1]
        self._notify()
        return item

    def drain(self) -> list[tuple[T, int]]:
        """Every item queued now, without waiting."""
        items = list(self._items)
        self._items.clear()
        self.bytes = 0
        self._notify()
        return items

    def close(self) -> None:
        """No more items will come: ``get`` returns None once the queue is empty."""
        self._closed = True
        self._notify()


def request_bytes(request: Request) -> int:
    """What a request counts against the bounds: its protobuf size."""
    return request.ByteSize() if isinstance(request, pb.StreamEventsRequest) else 0


class EventStream:
    """One StreamEvents call's tasks and queues, and what of the in-flight budget it holds."""

    def __init__(
        self,
        *,
        answer: Answerer,
        watch: Callable[[str], Watcher],
        revoked: Callable[[], bool],
        budget: InflightBudget,
        max_message_bytes: int,
        idle_check_s: float,
        connection: str = "",
        tenant: str | None = None,
    ) -> None:
        self._answer = answer
        self._watch = watch
        self._revoked = revoked
        self._budget = budget
        # The budget lets tenants in fairly, and each tenant's connections, by these keys.
        self._connection = connection
        self._tenant = tenant
        self._max_message_bytes = max_message_bytes
        self._idle_check_s = idle_check_s
        self._inbox: ByteQueue[Request] = ByteQueue(STREAM_READ_AHEAD, STREAM_READ_AHEAD_BYTES)
        self._outgoing: ByteQueue[pb.StreamEventsResponse] = ByteQueue(
            STREAM_QUEUE_SIZE, STREAM_QUEUE_BYTES
        )
        self._watchers: dict[str, Watcher] = {}
        self._forwarders: list[asyncio.Task[None]] = []
        self._held = 0  # of the budget, by this stream; all given back when it ends

    async def run(
        self, requests: AsyncIterator[Request]
    ) -> AsyncGenerator[pb.StreamEventsResponse, None]:
        """The stream's answers, in order, until the client half-closes; Revoked ends it.

        Acks of writes made while the token held are delivered; results, the
        end of the stream and idle time are where a revocation ends it.
        """
        receiver = asyncio.create_task(self._receive(requests))
        reader = asyncio.create_task(self._read())
        try:
            while True:
                # What is queued already goes out without a timed wait (a task and a timer).
                item = self._outgoing.get_nowait() if len(self._outgoing) else None
                if item is None:
                    try:
                        item = await asyncio.wait_for(self._outgoing.get(), self._idle_check_s)
                    except TimeoutError:
                        if self._revoked():
                            raise Revoked from None
                        continue
                if item is None:  # the client half-closed and every answer is out
                    if self._revoked():
                        raise Revoked
                    break
                out, size = item
                if not out.request_id and self._revoked():  # a result, not an ack
                    raise Revoked
                yield out
                self._give_back(size)  # written: grpc asked for the next one
            await reader
        finally:
            reader.cancel()
            receiver.cancel()
            for task in self._forwarders:
                task.cancel()
            for watcher in self._watchers.values():
                watcher.close()
            self._budget.release(self._held)
            self._held = 0

    def _give_back(self, size: int) -> None:
        self._held -= size
        self._budget.release(size)

    def _count(self, size: int) -> None:
        self._held += size
        self._budget.charge(size)

    async def _receive(self, requests: AsyncIterator[Request]) -> None:
        """Read the next request only once the inbox has room and the last one was taken in.

        Until then nothing is read off the call, so grpc grants the client no
        more than its flow-control window: the stream holds its inbox, plus
        at most the one request waiting for the in-flight budget.
        """
        incoming = aiter(requests)
        try:
            while True:
                await self._inbox.room()
                request = await anext(incoming, None)
                if request is None:
                    break
                size = request_bytes(request)
                await self._budget.admit(size, self._connection, self._tenant)
                self._held += size
                self._inbox.put_nowait(request, size)
        finally:
            self._inbox.close()

    async def _read(self) -> None:
        """Take what has arrived, answer it as a batch, queue the answers in order."""
        try:
            while True:
                # Answer more only while the client takes the answers: one that
                # does not read stops the stream reading, instead of queueing acks.
                await self._outgoing.room()
                first = await self._inbox.get()
                if first is None:
                    break
                arrived = [first, *self._inbox.drain()]
                if self._revoked():
                    break  # nothing more is written for a revoked token
                outs = await self._answer([request for request, _ in arrived])
                sizes = [out.ByteSize() for out in outs]
                # The answers exist now: count them before the requests are given back.
                self._count(sum(sizes))
                self._give_back(sum(size for _, size in arrived))
                for out, size in zip(outs, sizes, strict=True):
                    if out.HasField("append"):
                        self._watch_session(out.session_id)
                    await self._outgoing.put(out, size)
        finally:
            self._outgoing.close()

    def _watch_session(self, session_id: str) -> None:
        if session_id in self._watchers or len(self._watchers) >= STREAM_MAX_WATCHED_SESSIONS:
            return
        watcher = self._watchers[session_id] = self._watch(session_id)
        self._forwarders.append(asyncio.create_task(self._forward(watcher, session_id)))

    async def _forward(self, watcher: Watcher, session_id: str) -> None:
        while True:
            update = await watcher.next()
            if isinstance(update, Gone):  # deleted: an append after makes a watch anew
                if self._watchers.get(session_id) is watcher:
                    del self._watchers[session_id]
                return
            if isinstance(update, Lagged):
                continue  # a stream only relays results; WatchSession reports lag
            out = pb.StreamEventsResponse(session_id=session_id)
            answers.result_in(update, out.compaction, out, self._max_message_bytes)
            size = out.ByteSize()
            self._count(size)
            await self._outgoing.put(out, size)
