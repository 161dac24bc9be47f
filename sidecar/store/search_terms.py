"""The terms of a search query, and how many a query may have: the same for every store.

A query is whitespace-separated terms, all required. A repeated term adds
nothing to what matches (AND is idempotent) but costs both stores work per
occurrence — FTS5 a phrase in its MATCH and in every snippet, PostgreSQL a
lexeme in the tsquery, ranked and highlighted for every hit — so repeats are
dropped before either store sees the query. What is left is bounded, so that
no query within the bounds costs a store much more than an ordinary one:

- at most MAX_QUERY_BYTES bytes of UTF-8, as sent;
- at most MAX_QUERY_WORDS words once repeats are dropped. A word is a run of
  letters, marks or digits, as both stores' tokenizers split text (``a,b,c``
  is three words of one term), and a term with none counts as one.

Past either bound the query is refused, ``InvalidArgument`` naming ``query``.
"""

from __future__ import annotations

import unicodedata

from sidecar.errors import InvalidArgument

MAX_QUERY_BYTES = 4096
MAX_QUERY_WORDS = 64

_FIELD = "query"


def query_terms(text: str) -> tuple[str, ...]:
    """The distinct terms of ``text``, in the order first given; InvalidArgument past the bounds.

    Only identical terms are dropped: case and accents are the stores' to
    fold, and they do not fold them alike. NULs are spaces (FTS5 reads its
    query as a C string, PostgreSQL refuses them in text).
    """
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_QUERY_BYTES:
        raise InvalidArgument(
            _FIELD, f"is {size:,} bytes, more than the {MAX_QUERY_BYTES:,} a search may have"
        )
    terms = tuple(dict.fromkeys(text.replace("\x00", " ").split()))
    words = sum(_words(term) for term in terms)
    if words > MAX_QUERY_WORDS:
        raise InvalidArgument(
            _FIELD,
            f"has {words} words, more than the {MAX_QUERY_WORDS} a search may have"
            " (a repeated term counts once; punctuation separates words)",
        )
    return terms


def _words(term: str) -> int:
    """Runs of letters, marks and digits in ``term``; at least one."""
    count = 0
    inside = False
    for char in term:
        in_word = unicodedata.category(char)[0] in "LMN"
        if in_word and not inside:
            count += 1
        inside = in_word
    return max(count, 1)
