"""Page sizes and opaque page tokens, shared by every store.

A token is base64url of a 16-byte HMAC-SHA256 tag followed by the JSON array
``after`` enciphered, the sort key of the last item returned (keyset pagination: a page
costs O(page) however deep it is, and items written meanwhile are neither
skipped nor repeated), or an offset for ranked search, whose order has no
stable key. The tag covers ``after`` and two things the token does not carry:

- ``kind``, the listing, so a token from one listing is refused by another;
- ``bound``, what was listed (a session id, a hash of the filter or query, all
  in the caller's tenant namespace), so reusing a token with other arguments,
  or in another tenant's namespace, is refused rather than silently skipping
  or repeating items.

``after`` is enciphered with a keystream drawn from the key and the tag (a
synthetic-IV construction: the tag is the nonce), so a token reads as noise.
A sort key can be a store-wide row id (a compaction record's): in clear text,
two tokens would tell a tenant how many compactions every other tenant ran in
between.

A client can therefore only hand back a token exactly as it got it: one it
built, altered, or took from another listing is ``InvalidArgument("page_token",
...)``. The key is the process's own random one unless ``use_key`` is given a
secret (the server's ``page_token_key``): a token is accepted only by servers
signing with the same key, so replicas that share a database must share
``page_token_key`` for a client to page across them, and a restart without
it ends every listing in progress (the client starts it again from the first
page).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from sidecar.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

_FIELD = "page_token"
_TAG_BYTES = 16
MAX_TOKEN_CHARS = 1024
"""Longer than any token issued (a session id is the longest key): refused before reading it."""
_PROCESS_KEY = secrets.token_bytes(32)
_key = _PROCESS_KEY


def _stream_key(key: bytes) -> bytes:
    """The keystream's own key: never the signing key itself."""
    return hashlib.sha256(b"compaction-sidecar page token stream\0" + key).digest()


_stream = _stream_key(_key)


def page_size(requested: int) -> int:
    """``requested`` capped at MAX_PAGE_SIZE; zero or less means DEFAULT_PAGE_SIZE."""
    if requested <= 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def fingerprint(*parts: object) -> str:
    """A stable hash of a listing's arguments, to bind a token to them (it is signed, not sent)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def use_key(secret: str) -> None:
    """Sign and check tokens with a key derived from ``secret``; "" means the process's own.

    The server calls this once at start; every store in the process shares the key.
    """
    global _key, _stream
    if not secret:
        _key = _PROCESS_KEY
    else:
        _key = hashlib.sha256(b"compaction-sidecar page tokens\0" + secret.encode()).digest()
    _stream = _stream_key(_key)


def _tag(kind: str, bound: str, payload: bytes) -> bytes:
    message = b"\0".join((kind.encode(), bound.encode(), payload))
    return hmac.digest(_key, message, "sha256")[:_TAG_BYTES]


def _cipher(tag: bytes, data: bytes) -> bytes:
    """``data`` XOR a keystream of HMAC-SHA256(stream key, tag || block number): both ways."""
    size = len(data)
    stream = b"".join(
        hmac.digest(_stream, tag + block.to_bytes(4, "big"), "sha256")
        for block in range((size + 31) // 32)
    )[:size]
    return (int.from_bytes(data) ^ int.from_bytes(stream)).to_bytes(size)


def encode_token(kind: str, bound: str, after: tuple[int | str, ...]) -> str:
    payload = json.dumps(list(after), separators=(",", ":")).encode()
    tag = _tag(kind, bound, payload)
    token = tag + _cipher(tag, payload)
    return base64.urlsafe_b64encode(token).decode("ascii").rstrip("=")


def _decode(token: str, kind: str, bound: str) -> list[object]:
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidArgument(_FIELD, "malformed page token (longer than any issued)")
    try:
        raw = base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode("ascii"))
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise InvalidArgument(_FIELD, "malformed page token") from exc
    tag = raw[:_TAG_BYTES]
    payload = _cipher(tag, raw[_TAG_BYTES:])
    # Only the exact text issued: base64 that decodes alike but reads otherwise is not it.
    canonical = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") == token
    if not (canonical and hmac.compare_digest(tag, _tag(kind, bound, payload))):
        raise InvalidArgument(
            _FIELD,
            f"not issued by this listing ({kind}) for these arguments, or issued by a server"
            " with another page_token_key: pass next_page_token back unchanged, or start the"
            " listing again with an empty one",
        )
    try:  # signed, so issued here; read with care all the same
        after = json.loads(payload)
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise InvalidArgument(_FIELD, "malformed page token") from exc
    if not isinstance(after, list):
        raise InvalidArgument(_FIELD, "malformed page token")
    return after


def decode_int_key(token: str, *, kind: str, bound: str, length: int) -> tuple[int, ...]:
    """The integer sort key ``after`` of a token made by ``encode_token``."""
    after = _decode(token, kind, bound)
    # Keys are 64-bit integers in both stores: anything else was not issued by them.
    if len(after) != length or not all(
        isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in after
    ):
        raise InvalidArgument(_FIELD, "malformed page token")
    return tuple(v for v in after if isinstance(v, int))


SEARCH_BLOCK = 10_000
"""How many matches a search ranks for one page: a block of the newest matches.

Ranking scores every match it orders, so ranking them all before paging made
a page cost grow with the whole corpus's matches. A search ranks the newest
``SEARCH_BLOCK`` matches (after its filters), best first, and pages through
them; then the next older block, and so on. Every match is returned exactly
once; within a block the order is exact, and a query with no more matches
than a block is ranked exactly as a whole. A page costs one block, however
many matches there are.
"""


@dataclass(frozen=True, slots=True)
class SearchPlace:
    """Where a search's page starts: its block (0 the newest), its offset in it, and the
    newest event the listing sees (None: any; a token of an older server)."""

    block: int
    offset: int
    newest: int | None

    def next_token(self, bound: str, read: int, more_in_block: bool, more_blocks: bool) -> str:
        """The token of the page after one that read ``read`` hits from here."""
        if more_in_block:
            place = (self.block, self.offset + read)
        elif more_blocks:
            place = (self.block + 1, 0)
        else:
            return ""
        after = place if self.newest is None else (*place, self.newest)
        return encode_token("search", bound, after)


def decode_search_place(token: str, *, bound: str) -> SearchPlace | None:
    """Where a search's page starts; None for the first page.

    A listing sees the events stored when its first page was read (the store
    puts the newest event's key then in ``SearchPlace.newest``), so the events
    appended while a client pages cannot move the hits of the pages still to
    come: each hit comes once.
    """
    if not token:
        return None
    length = len(_decode(token, "search", bound))
    if length not in (2, 3):
        raise InvalidArgument(_FIELD, "malformed page token")
    values = decode_int_key(token, kind="search", bound=bound, length=length)
    if any(v < 0 for v in values):
        raise InvalidArgument(_FIELD, "malformed page token")
    return SearchPlace(values[0], values[1], values[2] if length == 3 else None)


def decode_str_key(token: str, *, kind: str, bound: str) -> str:
    """The single string sort key ``after`` of a token made by ``encode_token``."""
    after = _decode(token, kind, bound)
    if len(after) != 1 or not isinstance(after[0], str):
        raise InvalidArgument(_FIELD, "malformed page token")
    return after[0]
