"""Checks on incoming events, with errors that name the offending field.

Run before anything is stored, so a rejected batch never changes stored data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Protocol

from sidecar import strict_json
from sidecar.errors import InvalidArgument, LimitExceeded
from sidecar.model import Event, LabelUpdate, Role
from sidecar.strict_json import MAX_JSON_DEPTH as MAX_JSON_DEPTH

_ID = re.compile(r"[A-Za-z0-9._:~@/+=-]{1,128}")
# What the engine accepts: a client's id, in a tenant's namespace or not (see tenancy.py).
_MIME_TYPE = re.compile(r"[\x20-\x7e]{1,255}")
_STORED_ID = re.compile(r"(?:[A-Za-z0-9._-]{1,64}#)?[A-Za-z0-9._:~@/+=-]{1,128}")

# Free-text names an event carries, each bounded on its own rather than only by the
# event's size, as ids, tool names and media types are: the summarizer's input carries
# each event's author whole (only tool results are cut to its budget), and the
# renderings send a reasoning block's id back to its provider.
MAX_AUTHOR_CHARS = 256
"""The longest ``Event.author``: a name (an agent's, a user's), bounded as a tool name is."""
MAX_BRANCH_CHARS = 1024
"""The longest ``Event.branch``: a path of agent names (ADK's ``root.planner.search``),
bounded as a label value is; ten names of 100 characters fit."""
MAX_REASONING_ID_CHARS = 256
"""The longest ``Reasoning.id``: the provider's id of the block (OpenAI's ``rs_...``, some
50 characters), bounded as a call id is."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits on what one request may store.

    The counts bound the work one request makes on the event loop: each
    tool call, tool result, part and metadata entry is checked and converted
    one by one, some microseconds each. They are checked first, from the
    counts alone (``check_shape``), so a request far past them costs nothing.
    """

    max_event_bytes: int = 1 << 20
    max_events_per_append: int = 1000
    max_metadata_entries: int = 64
    max_labels: int = 64
    max_tool_calls_per_event: int = 1000
    max_tool_results_per_event: int = 1000
    max_parts_per_event: int = 1000
    max_tool_name_chars: int = 256
    """The longest tool name a call or result may carry (providers allow 64 to 128).

    Names and call ids are what a clearing placeholder repeats and what every
    rendering carries per call: unbounded, one event could make each of them
    as costly as its whole size.
    """
    max_call_id_chars: int = 256
    """The longest call id a call or result may carry."""
    max_items_per_append: int = 4096
    """Tool calls, tool results and parts of all the append's events together.

    An append at this and ``max_events_per_append`` holds the loop for some
    tens of milliseconds, about what 1,000 plain events do.
    """


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


def check_label_count(labels: Sized, limits: Limits, field: str = "labels") -> None:
    """LimitExceeded past ``max_labels``; a count only, so it is run on a request's protobuf
    map before it is made a dict (a million entries take seconds to convert)."""
    if len(labels) > limits.max_labels:
        raise LimitExceeded(
            "max_labels", f"{field} has {len(labels)} entries, the limit is {limits.max_labels}"
        )


def check_labels(labels: Mapping[str, str], limits: Limits, field: str = "labels") -> None:
    """Labels are for filtering sessions: a bounded number of short, NUL-free strings.

    NUL is refused because PostgreSQL text (and its jsonb label index) cannot
    hold it; one rule for both stores keeps a session portable between them.
    """
    check_label_count(labels, limits, field)
    for key, value in labels.items():
        if not key or len(key) > _MAX_LABEL_KEY or "\x00" in key:
            raise InvalidArgument(
                field, f"label key {key[:40]!r} must be 1-{_MAX_LABEL_KEY} characters, no NUL"
            )
        if len(value) > _MAX_LABEL_VALUE or "\x00" in value:
            raise InvalidArgument(
                f"{field}[{key}]", f"must be at most {_MAX_LABEL_VALUE} characters, no NUL"
            )


MAX_LABEL_UPDATES = 16
"""Sessions one append may change the labels of (each may be created)."""


class LabelUpdateShape(Protocol):
    """What ``check_label_update_counts`` reads of a label update: the model's and the
    protobuf message alike."""

    @property
    def set(self) -> Sized: ...
    @property
    def remove(self) -> Sized: ...


def check_label_update_counts(updates: Sequence[LabelUpdateShape], limits: Limits) -> None:
    """LimitExceeded past the counts label updates may have: counts only (``len``), so it is
    run on the protobuf before anything is built from it, as ``check_shape`` is for events.

    A session holds at most ``max_labels`` labels, so no update needs to remove more.
    """
    if len(updates) > MAX_LABEL_UPDATES:
        raise LimitExceeded(
            "max_label_updates",
            f"label_updates has {len(updates)} entries, the limit is {MAX_LABEL_UPDATES}",
        )
    for index, update in enumerate(updates):
        field = f"label_updates[{index}]"
        check_label_count(update.set, limits, f"{field}.set")
        check_label_count(update.remove, limits, f"{field}.remove")


def check_label_updates(session_id: str, updates: Sequence[LabelUpdate], limits: Limits) -> None:
    """Label updates of an append: each session named once, keys and values as labels'."""
    check_label_update_counts(updates, limits)
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


def check_strict_json(text: str, field: str) -> None:
    """JSON as RFC 8259 has it, which every client's parser reads the same way.

    Python's parser also reads NaN and Infinity, numbers past a double
    (``1e999``) and lone surrogate escapes (``"\\ud800"``), which other parsers
    refuse or mangle; and it nests as deep as the stack allows, which is not
    the same in every reader (see ``strict_json``).
    """
    try:
        strict_json.parse(text)
    except strict_json.NotStrictJson as exc:
        raise InvalidArgument(field, str(exc)) from None


def event_size(event: Event) -> int:
    """Approximate stored size of an event's content, in bytes (one rule: ``Event``'s own)."""
    return event.content_bytes()


class EventShape(Protocol):
    """What ``check_shape`` reads of an event: the model's Event and the protobuf message alike."""

    @property
    def tool_calls(self) -> Sized: ...
    @property
    def tool_results(self) -> Sized: ...
    @property
    def parts(self) -> Sized: ...
    @property
    def reasoning(self) -> Sized: ...
    @property
    def metadata(self) -> Sized: ...


def _refuse_entries(event: EventShape, limits: Limits, at: str) -> None:
    """LimitExceeded naming the first of ``event``'s repeated fields that is too long."""
    for name, limit_name in (
        ("tool_calls", "max_tool_calls_per_event"),
        ("tool_results", "max_tool_results_per_event"),
        ("parts", "max_parts_per_event"),
        ("reasoning", "max_parts_per_event"),
        ("metadata", "max_metadata_entries"),
    ):
        count, limit = len(getattr(event, name)), getattr(limits, limit_name)
        if count > limit:
            raise LimitExceeded(
                limit_name, f"{at}.{name} has {count} entries, the limit is {limit}"
            )


def check_shape(events: Sequence[EventShape], limits: Limits, field: str = "events") -> None:
    """LimitExceeded if an append holds too many events, or entries in them.

    Counts only (``len``), so it is run on the protobuf message before any
    model object is built from it: a million tool calls are refused in
    microseconds.
    """
    if len(events) > limits.max_events_per_append:
        raise LimitExceeded(
            "max_events_per_append",
            f"{len(events)} events in one append, the limit is {limits.max_events_per_append}",
        )
    items = 0
    for i, event in enumerate(events):
        calls, results, parts = len(event.tool_calls), len(event.tool_results), len(event.parts)
        thoughts = len(event.reasoning)
        if (
            calls > limits.max_tool_calls_per_event
            or results > limits.max_tool_results_per_event
            or parts > limits.max_parts_per_event
            or thoughts > limits.max_parts_per_event
            or len(event.metadata) > limits.max_metadata_entries
        ):
            _refuse_entries(event, limits, f"{field}[{i}]")
        items += calls + results + parts + thoughts
    if items > limits.max_items_per_append:
        raise LimitExceeded(
            "max_items_per_append",
            f"{field} hold {items} tool calls, tool results, parts and reasoning blocks in all,"
            f" the limit is {limits.max_items_per_append}",
        )


def check_events(events: Sequence[Event], limits: Limits) -> None:
    """Raise InvalidArgument or LimitExceeded for the first bad event."""
    if not events:
        raise InvalidArgument("events", "must hold at least one event")
    check_shape(events, limits)
    for i, event in enumerate(events):
        _check_event(event, f"events[{i}]", limits)


def _check_length(value: str, limit: int, field: str, setting: str = "") -> None:
    """InvalidArgument naming ``field`` (and the ``setting`` that sets ``limit``, if one does)
    when ``value`` is longer than ``limit`` characters."""
    if len(value) > limit:
        named = f" ({setting})" if setting else ""
        raise InvalidArgument(field, f"is {len(value)} characters, the limit is {limit}{named}")


def _check_identifiers(call_id: str, name: str, at: str, id_field: str, limits: Limits) -> None:
    """A call id and a tool name within ``max_call_id_chars`` and ``max_tool_name_chars``."""
    _check_length(call_id, limits.max_call_id_chars, f"{at}.{id_field}", "max_call_id_chars")
    _check_length(name, limits.max_tool_name_chars, f"{at}.name", "max_tool_name_chars")


def _check_event(event: Event, at: str, limits: Limits) -> None:
    if event.id and not _ID.fullmatch(event.id):
        raise InvalidArgument(
            f"{at}.id", "must be 1-128 characters of letters, digits and ._:~@/+=-"
        )
    _check_length(event.author, MAX_AUTHOR_CHARS, f"{at}.author")
    _check_length(event.branch, MAX_BRANCH_CHARS, f"{at}.branch")
    if event.tool_calls and event.role is not Role.ASSISTANT:
        raise InvalidArgument(f"{at}.tool_calls", "only ASSISTANT events may request tools")
    if event.reasoning and event.role is not Role.ASSISTANT:
        raise InvalidArgument(f"{at}.reasoning", "only ASSISTANT events carry reasoning")
    for j, block in enumerate(event.reasoning):
        if block.redacted and block.text:
            raise InvalidArgument(
                f"{at}.reasoning[{j}].text", "a redacted block has no text (its data is signature)"
            )
        _check_length(block.id, MAX_REASONING_ID_CHARS, f"{at}.reasoning[{j}].id")
    if event.tool_results and event.role is not Role.TOOL:
        raise InvalidArgument(f"{at}.tool_results", "only TOOL events may carry tool results")
    if event.role is Role.TOOL and not event.tool_results:
        raise InvalidArgument(f"{at}.tool_results", "a TOOL event needs at least one tool result")
    seen: set[str] = set()
    for j, call in enumerate(event.tool_calls):
        field = f"{at}.tool_calls[{j}]"
        if not call.id:
            raise InvalidArgument(f"{field}.id", "is required")
        _check_identifiers(call.id, call.name, field, "id", limits)
        if call.id in seen:
            raise InvalidArgument(f"{field}.id", f"duplicate call id {call.id!r} in one event")
        seen.add(call.id)
        if not call.name:
            raise InvalidArgument(f"{field}.name", "is required")
        check_strict_json(call.arguments_json or "{}", f"{field}.arguments_json")
    for j, result in enumerate(event.tool_results):
        if not result.call_id:
            raise InvalidArgument(f"{at}.tool_results[{j}].call_id", "is required")
        _check_identifiers(
            result.call_id, result.name, f"{at}.tool_results[{j}]", "call_id", limits
        )
    for j, part in enumerate(event.parts):
        if not part.mime_type:
            raise InvalidArgument(f"{at}.parts[{j}].mime_type", "is required")
        if not _MIME_TYPE.fullmatch(part.mime_type):
            # Sent on to providers as a header-like value: no control characters, no length
            # past any media type's.
            raise InvalidArgument(
                f"{at}.parts[{j}].mime_type",
                "must be a media type: at most 255 printable ASCII characters",
            )
        if part.data and part.uri:
            raise InvalidArgument(f"{at}.parts[{j}]", "set data or uri, not both")
    size = event_size(event)
    if size > limits.max_event_bytes:
        raise LimitExceeded(
            "max_event_bytes", f"{at} is {size} bytes, the limit is {limits.max_event_bytes}"
        )
