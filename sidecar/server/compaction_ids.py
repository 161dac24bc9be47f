"""One compaction's event ids, page by page (ListCompactions with ``ids_of``).

A pass over a window of 100,000 events archives 100,000 ids; its record
alone can pass the message size limit, so ListCompactions lists it with
its id lists left out (``*_omitted``), and they are read here in pages
bounded in count and bytes: the archived ids, then the cleared ones, then
the inserted ones, as one sequence. The page token is the offset into that
sequence, signed and enciphered as every other listing's (``paging``) and
bound to the compaction and its stored session id, which is in the caller's
tenant namespace: a token built, altered, or taken from another compaction,
session, tenant or listing is ``InvalidArgument("page_token", ...)``.
"""

from __future__ import annotations

from sidecar.errors import InvalidArgument
from sidecar.gen.compaction.v1 import session_pb2
from sidecar.server import convert
from sidecar.store import paging
from sidecar.store.protocol import CompactionRecord

DEFAULT_PAGE_IDS = 1000
MAX_PAGE_IDS = 10_000
_ID_OVERHEAD = 3  # an id's tag and length on the wire (ids are at most 128 characters)


_KIND = "compaction-ids"


def _bound(record: CompactionRecord) -> str:
    """What a token pages: this compaction of this stored session (tenant prefix and all)."""
    return paging.fingerprint(record.session_id, record.compaction_id)


def _token(record: CompactionRecord, offset: int) -> str:
    return paging.encode_token(_KIND, _bound(record), (offset,))


def _offset(record: CompactionRecord, token: str) -> int:
    """Where the page of ``token`` starts; INVALID_ARGUMENT naming page_token unless it
    was issued for this compaction's ids."""
    if not token:
        return 0
    [offset] = paging.decode_int_key(token, kind=_KIND, bound=_bound(record), length=1)
    if offset < 0:
        raise InvalidArgument("page_token", "malformed page token")
    return offset


def ids_page(
    record: CompactionRecord, page_size: int, page_token: str, max_bytes: int
) -> tuple[session_pb2.Compaction, str]:
    """The record with the page of its ids that ``page_token`` starts, and the next token.

    At most ``page_size`` ids (0: the default; the caller refused a negative
    one) and ``max_bytes`` bytes of them; at least one id while any is left.
    """
    size = min(page_size or DEFAULT_PAGE_IDS, MAX_PAGE_IDS)
    lists = (record.archived_ids, record.cleared_ids, record.inserted_ids)
    total = sum(map(len, lists))
    start = _offset(record, page_token)
    if start > total:
        raise InvalidArgument("page_token", "is past this compaction's ids")
    out = session_pb2.Compaction()
    convert.record_out(record, out)
    for name in ("archived_event_ids", "cleared_event_ids", "inserted_event_ids"):
        out.ClearField(name)
    budget = max_bytes - out.ByteSize()
    taken = 0
    position = start
    for ids, into in zip(
        lists, (out.archived_event_ids, out.cleared_event_ids, out.inserted_event_ids), strict=True
    ):
        if position >= len(ids):
            position -= len(ids)
            continue
        while position < len(ids) and taken < size:
            cost = len(ids[position].encode()) + _ID_OVERHEAD
            if taken and cost > budget:
                break
            into.append(ids[position])
            budget -= cost
            taken += 1
            position += 1
        if taken >= size or position < len(ids):
            break
        position = 0
    end = start + taken
    return out, (_token(record, end) if end < total else "")
