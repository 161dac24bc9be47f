"""Page sizes and opaque page tokens, shared by every store.

A token is base64url of a small JSON array ``[kind, bound, *after]``:

- ``kind`` names the listing, so a token from one listing is refused by another;
- ``bound`` ties the token to what was listed (a session id, a hash of the
  filter or query), so reusing it with other arguments is refused rather than
  silently skipping or repeating items;
- ``after`` is the sort key of the last item returned (keyset pagination: a
  page costs O(page) however deep it is, and items written meanwhile are
  neither skipped nor repeated), or an offset for ranked search, whose order
  has no stable key.

Clients must treat tokens as opaque; anything that does not decode to the
expected shape is ``InvalidArgument("page_token", ...)``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from sidecar.errors import InvalidArgument

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000

_FIELD = "page_token"


def page_size(requested: int) -> int:
    """``requested`` capped at MAX_PAGE_SIZE; zero or less means DEFAULT_PAGE_SIZE."""
    if requested <= 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def fingerprint(*parts: object) -> str:
    """A short stable hash of a listing's arguments, to bind a token to them."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def encode_token(kind: str, bound: str, after: tuple[int | str, ...]) -> str:
    payload = json.dumps([kind, bound, *after], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def _decode(token: str, kind: str, bound: str) -> list[object]:
    try:
        padded = token + "=" * (-len(token) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError, RecursionError) as exc:
        raise InvalidArgument(_FIELD, "malformed page token") from exc
    if not isinstance(payload, list) or len(payload) < 2 or payload[0] != kind:
        raise InvalidArgument(_FIELD, f"not a page token of this listing ({kind})")
    if payload[1] != bound:
        raise InvalidArgument(_FIELD, "page token was issued for different arguments")
    return payload[2:]


def decode_int_key(token: str, *, kind: str, bound: str, length: int) -> tuple[int, ...]:
    """The integer sort key ``after`` of a token made by ``encode_token``."""
    after = _decode(token, kind, bound)
    # Keys are 64-bit integers in both stores: anything else was not issued by them.
    if len(after) != length or not all(
        isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 for v in after
    ):
        raise InvalidArgument(_FIELD, "malformed page token")
    return tuple(v for v in after if isinstance(v, int))


def decode_offset(token: str, *, kind: str, bound: str) -> int:
    """The offset ``after`` of a ranked listing's token: "" is the first page, at 0.

    A negative offset was never issued: SQLite would read it as 0 (the first
    page again), PostgreSQL refuses it (an INTERNAL error).
    """
    if not token:
        return 0
    (offset,) = decode_int_key(token, kind=kind, bound=bound, length=1)
    if offset < 0:
        raise InvalidArgument(_FIELD, "malformed page token")
    return offset


def decode_str_key(token: str, *, kind: str, bound: str) -> str:
    """The single string sort key ``after`` of a token made by ``encode_token``."""
    after = _decode(token, kind, bound)
    if len(after) != 1 or not isinstance(after[0], str):
        raise InvalidArgument(_FIELD, "malformed page token")
    return after[0]
