"""JSON as RFC 8259 has it: what the append checks and what the renderings parse.

Python's ``json`` reads more than RFC 8259 JSON: the ``NaN`` and ``Infinity``
literals, numbers too large for a double (``1e999`` reads as ``inf`` and is
written back as ``Infinity``), lone surrogate escapes (``"\\ud83d"``, what
JavaScript's ``JSON.stringify`` makes of a cut emoji, read as a string that
cannot be encoded as UTF-8), and nesting as deep as the stack allows (which
is not the same in every reader, and past it is a ``RecursionError``). Any
of these in a rendering is a request no provider takes, or an answer the
server cannot encode. One parser refuses them all, for the append's check
(``engine.validation``) and for the renderings (``providers``), which fall
back to a value's text instead.
"""

from __future__ import annotations

import json
import math
import re
import sys

MAX_JSON_DEPTH = 100
"""How deep JSON in an event may nest: protobuf's own bound on a message's nesting.

Far below Python's recursion limit, so every reader in this process (an
adapter's ``json.loads`` deep in a framework's stack) parses what was stored.
"""

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class NotStrictJson(ValueError):
    """Text that is not RFC 8259 JSON; the message says why (for a field's error)."""


def _refuse_constant(name: str) -> object:
    raise NotStrictJson(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotStrictJson(f"the number {text[:40]} overflows a double")
    return value


# One decoder for every parse: ``json.loads`` with an option builds one per call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)


def _nests_deeper(value: object, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` deep (level by level)."""
    level = [value]
    for _ in range(limit):
        if not level:  # a flat value is done in a level or two, not ``limit``
            return False
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
    return any(isinstance(item, dict | list) for item in level)


def parse(text: str) -> object:
    """The value of ``text``, RFC 8259 JSON nested at most ``MAX_JSON_DEPTH`` deep;
    anything else raises ``NotStrictJson``."""
    try:
        value = _DECODER.decode(text)
    except RecursionError:  # past the stack, so past MAX_JSON_DEPTH too
        raise NotStrictJson(f"nests deeper than {MAX_JSON_DEPTH} levels") from None
    except NotStrictJson:
        raise
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise NotStrictJson(f"is not valid JSON: {exc}") from None
        # Only int() raises a plain ValueError here: past the digits Python converts.
        raise NotStrictJson(
            f"holds a number of more than {sys.get_int_max_str_digits()} digits"
        ) from None
    # Nesting never goes deeper than the text has brackets (those in strings only add to
    # the count): counting them is a C loop, walking the value a Python one.
    brackets = text.count("{") + text.count("[")
    if brackets > MAX_JSON_DEPTH and _nests_deeper(value, MAX_JSON_DEPTH):
        raise NotStrictJson(f"nests deeper than {MAX_JSON_DEPTH} levels")
    # A lone surrogate is in the text itself, or made by an escape (paired ones decode whole).
    if _SURROGATE.search(text) or (
        _SURROGATE_ESCAPE.search(text) and _SURROGATE.search(json.dumps(value, ensure_ascii=False))
    ):
        raise NotStrictJson("holds a lone surrogate (\\ud800-\\udfff)")
    return value
