"""Checks on incoming events, with errors that name the offending field.

Run before anything is stored, so a rejected batch never changes stored data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sidecar.errors import InvalidArgument, LimitExceeded
from sidecar.model import Event, LabelUpdate, Role

_ID = re.compile(r"[A-Za-z0-9._:~@/+=-]{1,128}")
# What the engine accepts: a client's id, in a tenant's namespace or not (see tenancy.py).
_STORED_ID = re.compile(r"(?:[A-Za-z0-9._-]{1,64}#)?[A-Za-z0-9._:~@/+=-]{1,128}")


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits on what one request may store."""

    max_event_bytes: int = 1 << 20
    max_events_per_append: int = 1000
    max_metadata_entries: int = 64
    max_labels: int = 64


def check_session_id(session_id: str, field: str = "session_id") -> None:
    """A session id as a client sends it."""
    if not _ID.fullmatch(session_id):
        raise InvalidArgument(
            field, "must be 1-128 characters of letters, digits and . _ : ~ @ / + = -"
        )


def check_stored_session_id(session_id: str, field: str = "session_id") -> None:
    """A session id as the engine stores it: a client's, possibly in a tenant's namespace."""
    if not _STORED_ID.fullmatch(session_id):
        raise InvalidArgument(
            field, "must be 1-128 characters of letters, digits and . _ : ~ @ / + = -"
        )


_MAX_LABEL_KEY = 256
_MAX_LABEL_VALUE = 1024


def check_labels(labels: Mapping[str, str], limits: Limits, field: str = "labels") -> None:
    """Labels are for filtering sessions: a bounded number of short, NUL-free strings.

    NUL is refused because PostgreSQL text (and its jsonb label index) cannot
    hold it; one rule for both stores keeps a session portable between them.
    """
    if len(labels) > limits.max_labels:
        raise LimitExceeded(
            "max_labels", f"{field} has {len(labels)} entries, the limit is {limits.max_labels}"
        )
    for key, value in labels.items():
        if not key or len(key) > _MAX_LABEL_KEY or "\x00" in key:
            raise InvalidArgument(
                field, f"label key {key[:40]!r} must be 1-{_MAX_LABEL_KEY} characters, no NUL"
            )
        if len(value) > _MAX_LABEL_VALUE or "\x00" in value:
            raise InvalidArgument(
                f"{field}[{key}]", f"must be at most {_MAX_LABEL_VALUE} characters, no NUL"
            )


def check_label_updates(session_id: str, updates: Sequence[LabelUpdate], limits: Limits) -> None:
    """Label updates of an append: each session named once, keys and values as labels'."""
    seen: set[str] = set()
    for index, update in enumerate(updates):
        field = f"label_updates[{index}]"
        target = update.session_id or session_id
        if update.session_id:
            check_stored_session_id(update.session_id, f"{field}.session_id")
        if target in seen:
            raise InvalidArgument(f"{field}.session_id", f"names session {target!r} twice")
        seen.add(target)
        check_labels(update.set, limits, f"{field}.set")
        for key in update.remove:
            if not key or len(key) > _MAX_LABEL_KEY or "\x00" in key:
                raise InvalidArgument(
                    f"{field}.remove",
                    f"label key {key[:40]!r} must be 1-{_MAX_LABEL_KEY} characters",
                )
            if key in update.set:
                raise InvalidArgument(f"{field}.remove", f"label {key[:40]!r} is also in set")


MAX_JSON_DEPTH = 100
"""How deep JSON in an event may nest: protobuf's own bound on a message's nesting.

Far below Python's recursion limit, so every reader in this process (an
adapter's ``json.loads`` deep in a framework's stack) parses what was stored.
"""

_SURROGATE = re.compile(r"[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _nests_deeper(value: object, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` deep (level by level)."""
    level = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
    return any(isinstance(item, dict | list) for item in level)


def check_strict_json(text: str, field: str) -> None:
    """JSON as RFC 8259 has it, which every client's parser reads the same way.

    Python's parser also reads NaN and Infinity and lone surrogate escapes
    (``"\\ud800"``), which other parsers refuse or mangle; and it nests as
    deep as the stack allows, which is not the same in every reader.
    """
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:  # past the stack, so past MAX_JSON_DEPTH too
        raise InvalidArgument(field, f"nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidArgument(field, f"is not valid JSON: {exc}") from None
    if _nests_deeper(value, MAX_JSON_DEPTH):
        raise InvalidArgument(field, f"nests deeper than {MAX_JSON_DEPTH} levels")
    # A lone surrogate is in the text itself, or made by an escape (paired ones decode whole).
    if _SURROGATE.search(text) or (
        _SURROGATE_ESCAPE.search(text) and _SURROGATE.search(json.dumps(value, ensure_ascii=False))
    ):
        raise InvalidArgument(field, "holds a lone surrogate (\\ud800-\\udfff)")


def event_size(event: Event) -> int:
    """Approximate stored size of an event's content, in bytes."""
    size = len(event.text.encode()) + sum(len(p.data) + len(p.uri) for p in event.parts)
    size += sum(len(c.arguments_json) + len(c.name) + len(c.id) for c in event.tool_calls)
    size += sum(len(r.content.encode()) + len(r.name) for r in event.tool_results)
    size += sum(len(k) + len(v) for k, v in event.metadata.items())
    return size


def check_events(events: Sequence[Event], limits: Limits) -> None:
    """Raise InvalidArgument or LimitExceeded for the first bad event."""
    if not events:
        raise InvalidArgument("events", "must hold at least one event")
    if len(events) > limits.max_events_per_append:
        raise LimitExceeded(
            "max_events_per_append",
            f"{len(events)} events in one append, the limit is {limits.max_events_per_append}",
        )
    for i, event in enumerate(events):
        _check_event(event, f"events[{i}]", limits)


def _check_event(event: Event, at: str, limits: Limits) -> None:
    if event.id and not _ID.fullmatch(event.id):
        raise InvalidArgument(
            f"{at}.id", "must be 1-128 characters of letters, digits and ._:~@/+=-"
        )
    if event.tool_calls and event.role is not Role.ASSISTANT:
        raise InvalidArgument(f"{at}.tool_calls", "only ASSISTANT events may request tools")
    if event.tool_results and event.role is not Role.TOOL:
        raise InvalidArgument(f"{at}.tool_results", "only TOOL events may carry tool results")
    if event.role is Role.TOOL and not event.tool_results:
        raise InvalidArgument(f"{at}.tool_results", "a TOOL event needs at least one tool result")
    seen: set[str] = set()
    for j, call in enumerate(event.tool_calls):
        field = f"{at}.tool_calls[{j}]"
        if not call.id:
            raise InvalidArgument(f"{field}.id", "is required")
        if call.id in seen:
            raise InvalidArgument(f"{field}.id", f"duplicate call id {call.id!r} in one event")
        seen.add(call.id)
        if not call.name:
            raise InvalidArgument(f"{field}.name", "is required")
        check_strict_json(call.arguments_json or "{}", f"{field}.arguments_json")
    for j, result in enumerate(event.tool_results):
        if not result.call_id:
            raise InvalidArgument(f"{at}.tool_results[{j}].call_id", "is required")
    for j, part in enumerate(event.parts):
        if not part.mime_type:
            raise InvalidArgument(f"{at}.parts[{j}].mime_type", "is required")
        if part.data and part.uri:
            raise InvalidArgument(f"{at}.parts[{j}]", "set data or uri, not both")
    if len(event.metadata) > limits.max_metadata_entries:
        raise LimitExceeded(
            "max_metadata_entries",
            f"{at}.metadata has {len(event.metadata)} entries,"
            f" the limit is {limits.max_metadata_entries}",
        )
    size = event_size(event)
    if size > limits.max_event_bytes:
        raise LimitExceeded(
            "max_event_bytes", f"{at} is {size} bytes, the limit is {limits.max_event_bytes}"
        )
