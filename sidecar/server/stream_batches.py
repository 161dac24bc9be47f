"""StreamEvents' answers: a batch of requests that arrived together, answered at once.

Each session's requests run in order, and consecutive unchecked appends to
one session fold into one append (one transaction, acks split back per
request). Sessions run side by side:

- sessions whose requests all fold into one unchecked append go to the
  engine together (``SessionEngine.append_many``): one count of their text
  and one store call (on SQLite each session's write queued fairly under
  its own session, all at once, and committed in groups). A stream
  round-robining over a hundred sessions makes every event its own append,
  and this is what keeps that from costing a task, a lock wait and a store
  round trip each;
- the others (a version check, a usage report, several groups) each run
  their groups in order, side by side, and their appends meet in the
  store's group commit.

A combined append that fails stored nothing, so its requests are re-run
alone and each gets its own answer, its error naming its own field. A
message that does not decode gets its own INVALID_ARGUMENT answer (it has
no request id to carry) and the stream goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from google.rpc import code_pb2

from sidecar.engine.engine import SessionEngine
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.server import answers, convert, fields
from sidecar.server.appends import Appends
from sidecar.server.decoding import Marker, Refused, Undecodable, undecodable_message
from sidecar.store.protocol import PlainAppend

Indexed = list[tuple[int, pb.StreamEventsRequest]]
Groups = list[list[pb.StreamEventsRequest]]
Answered = list[tuple[int, pb.StreamEventsResponse]]


def _plain(request: pb.StreamEventsRequest) -> bool:
    """An append that folds with its neighbours: no version check, no usage report."""
    return not request.expected_version and not request.HasField("usage")


class StreamBatches:
    """Answers a stream's batches for the servicer; see the module docstring.

    It is handed what it calls: the engine (for the combined appends and the
    limits), the servicer's ``Appends`` (every other append goes through them,
    and a combined one is carried into the kept GetContext answers by them),
    and the server's send limit its acknowledgements are fitted within.
    """

    def __init__(self, engine: SessionEngine, appends: Appends, max_message_bytes: int) -> None:
        self._engine = engine
        self._appends = appends
        self._max_message_bytes = max_message_bytes

    async def answer(
        self, requests: Sequence[pb.StreamEventsRequest | Marker]
    ) -> list[pb.StreamEventsResponse]:
        """Answer requests that arrived together; the answers come back in request order."""
        answered: Answered = []
        by_session: dict[str, Indexed] = {}
        for index, request in enumerate(requests):
            if isinstance(request, Undecodable):
                out = pb.StreamEventsResponse()
                out.error.code = code_pb2.INVALID_ARGUMENT
                out.error.message = undecodable_message(request)
                answered.append((index, out))
            elif isinstance(request, Refused):
                out = pb.StreamEventsResponse(
                    request_id=request.request_id, session_id=request.session_id
                )
                out.error.CopyFrom(fields.status_of(request.error))
                answered.append((index, out))
            else:
                by_session.setdefault(request.session_id, []).append((index, request))

        together: list[tuple[Indexed, list[pb.StreamEventsRequest]]] = []
        alone: list[tuple[Indexed, Groups]] = []
        for items in by_session.values():
            groups = self._foldable([request for _, request in items])
            if len(groups) == 1 and _plain(groups[0][0]):
                together.append((items, groups[0]))
            else:
                alone.append((items, groups))
        if len(together) < 2:  # one session's append needs no company
            alone += [(items, [group]) for items, group in together]
            together = []

        work = [self._in_order(items, groups) for items, groups in alone]
        if together:
            work.append(self._together(together))
        if len(alone) == 1 and not together and not answered:  # one session: in order already
            return [out for _, out in await work[0]]
        for pairs in await asyncio.gather(*work):
            answered += pairs
        return [out for _, out in sorted(answered, key=lambda pair: pair[0])]

    async def _in_order(self, items: Indexed, groups: Groups) -> Answered:
        """One session's requests, group after group (``_foldable``'s groups of them)."""
        outs: list[pb.StreamEventsResponse] = []
        for group in groups:
            outs += await self._group(group)
        return list(zip((index for index, _ in items), outs, strict=True))

    async def _together(
        self, sessions: list[tuple[Indexed, list[pb.StreamEventsRequest]]]
    ) -> Answered:
        """Sessions whose requests each fold into one unchecked append, in one engine call."""
        limits = self._engine.limits
        appends: list[PlainAppend] = []
        ready: list[tuple[Indexed, list[pb.StreamEventsRequest]]] = []
        again: list[Indexed] = []
        for items, group in sessions:
            try:
                stored = fields.stored(group[0].session_id)
                events = convert.events_in([e for r in group for e in r.events], limits)
            except Exception:
                again.append(items)  # each request alone names its own bad field
                continue
            appends.append(PlainAppend(stored, tuple(events), group[0].create_if_missing))
            ready.append((items, group))
        answered: Answered = []
        results = await self._engine.append_many(appends) if appends else []
        for (items, group), append, result in zip(ready, appends, results, strict=True):
            if isinstance(result, Exception):
                if len(group) > 1:
                    again.append(items)
                    continue
                out = pb.StreamEventsResponse(
                    request_id=group[0].request_id, session_id=group[0].session_id
                )
                out.error.CopyFrom(fields.status_of(result))
                answered.append((items[0][0], out))
                continue
            self._appends.appended(append.session_id, result)
            acks = answers.split_ack(group, result, self._max_message_bytes)
            answered += zip((index for index, _ in items), acks, strict=True)
        for items in again:
            answered += await self._one_by_one(items)
        return answered

    def _foldable(self, requests: list[pb.StreamEventsRequest]) -> Groups:
        """Consecutive unchecked appends to one session, up to the per-append event limit.

        A request with an expected version stands alone: its check is about
        the session as that request alone would find it. So does one with a
        usage report, which is about the version it names, and answered in
        its own acknowledgement.
        """
        groups: Groups = []
        size = 0
        limit = self._engine.limits.max_events_per_append
        for request in requests:
            last = groups[-1] if groups else None
            if (
                last is not None
                and _plain(request)
                and _plain(last[-1])
                and request.session_id == last[-1].session_id
                and request.create_if_missing == last[-1].create_if_missing
                and size + len(request.events) <= limit
            ):
                last.append(request)
                size += len(request.events)
            else:
                groups.append([request])
                size = len(request.events)
        return groups

    async def _group(self, group: list[pb.StreamEventsRequest]) -> list[pb.StreamEventsResponse]:
        """Answer a group: one transaction for all when they all succeed, else one by one.

        A failed combined append stored nothing, so re-running the requests
        alone gives each its own answer (and its own error, naming its field).
        """
        if len(group) > 1:
            try:
                combined = await self._appends.append(
                    group[0].session_id,
                    [event for request in group for event in request.events],
                    0,
                    group[0].create_if_missing,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                pass  # fall through to one by one
            else:
                return answers.split_ack(group, combined, self._max_message_bytes)
        return [await self._alone(request) for request in group]

    async def _one_by_one(self, items: Indexed) -> Answered:
        return [(index, await self._alone(request)) for index, request in items]

    async def _alone(self, request: pb.StreamEventsRequest) -> pb.StreamEventsResponse:
        out = pb.StreamEventsResponse(request_id=request.request_id, session_id=request.session_id)
        try:
            result = await self._appends.append(
                request.session_id,
                request.events,
                request.expected_version,
                request.create_if_missing,
                usage=fields.usage_in(request),
            )
            answers.ack_out(result, out.append, self._max_message_bytes, out)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            out.error.CopyFrom(fields.status_of(exc))
        return out
