"""One compaction's event ids, page by page (ListCompactions with ``ids_of``).

A pass over a window of 100,000 events archives 100,000 ids; its record
alone can pass the message size limit, so ListCompactions lists it with
its id lists left out (``*_omitted``), and they are read here in pages
bounded in count and bytes: the archived ids, then the cleared ones, then
the inserted ones, as one sequence. The page token is the offset into that
sequence and the compaction it belongs to, opaque to the client.
"""

from __future__ import annotations

import base64
import binascii

from sidecar.errors import InvalidArgument
from sidecar.gen.compaction.v1 import session_pb2
from sidecar.server import convert
from sidecar.store.protocol import CompactionRecord

DEFAULT_PAGE_IDS = 1000
MAX_PAGE_IDS = 10_000
_ID_OVERHEAD = 3  # an id's tag and length on the wire (ids are at most 128 characters)


def _token(compaction_id: str, offset: int) -> str:
    raw = f"ids\x00{compaction_id}\x00{offset}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _offset(compaction_id: str, token: str) -> int:
    """Where the page of ``token`` starts; INVALID_ARGUMENT naming page_token if it is
    not one of this compaction's."""
    if not token:
        return 0
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        kind, of, offset = raw.split("\x00")
        if kind == "ids" and of == compaction_id and offset.isdigit():
            return int(offset)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise InvalidArgument("page_token", "is not a page of this compaction's ids")


def ids_page(
    record: CompactionRecord, page_size: int, page_token: str, max_bytes: int
) -> tuple[session_pb2.Compaction, str]:
    """The record with the page of its ids that ``page_token`` starts, and the next token.

    At most ``page_size`` ids (0: the default) and ``max_bytes`` bytes of
    them; at least one id while any is left.
    """
    if page_size < 0:
        raise InvalidArgument("page_size", "must not be negative")
    size = min(page_size or DEFAULT_PAGE_IDS, MAX_PAGE_IDS)
    lists = (record.archived_ids, record.cleared_ids, record.inserted_ids)
    total = sum(map(len, lists))
    start = _offset(record.compaction_id, page_token)
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
    return out, (_token(record.compaction_id, end) if end < total else "")
