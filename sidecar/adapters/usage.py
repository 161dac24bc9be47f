"""Usage reports: the provider's prompt tokens for a model call, sent with the model's answer.

The session calibrates its token estimates by them (docs/semantics.md, Calibration):
each report names the version of the context the call was built from, and
travels in the append that stores the model's answer, so a retried or
duplicated append, which stores nothing, counts nothing. A report is a
courtesy to the session, never a condition of storing: one the server
cannot take is logged at DEBUG and dropped, and the events are stored
without it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Generic, TypeVar

from sidecar.client import (
    AppendResult,
    InvalidArgumentError,
    LabelUpdate,
    ModelUsage,
    ResourceExhaustedError,
    SessionHandle,
    SyncSessionHandle,
)
from sidecar.compaction.tokens import STAND_IN_KEY
from sidecar.model import Event

log = logging.getLogger(__name__)

T = TypeVar("T")

# Sessions whose context version is remembered (least recently used out first): a
# process serving more at once reports for the most recent ones.
MAX_SESSIONS = 4096
# The largest prompt a report may name (the server's bound).
MAX_PROMPT_TOKENS = 1 << 40


class Recent(Generic[T]):
    """What an adapter remembers of each session's last model call (the context version it
    was built from, and what identifies its answer), for the most recent sessions only."""

    def __init__(self, max_sessions: int | None = None) -> None:
        self.max_sessions = MAX_SESSIONS if max_sessions is None else max_sessions
        self._by_session: OrderedDict[str, T] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_session)

    def set(self, key: str, value: T) -> None:
        self._by_session[key] = value
        self._by_session.move_to_end(key)
        if len(self._by_session) > self.max_sessions:
            self._by_session.popitem(last=False)

    def get(self, key: str) -> T | None:
        """The session's value, now the most recently used; None when not remembered."""
        value = self._by_session.get(key)
        if value is not None:
            self._by_session.move_to_end(key)
        return value

    def pop(self, key: str) -> T | None:
        return self._by_session.pop(key, None)


def model_usage(version: int | None, prompt_tokens: int | None) -> ModelUsage | None:
    """The report for a call made at ``version``, or None when there is nothing to report
    (the version is unknown, or the provider reported no prompt tokens)."""
    if version is None or version < 1 or prompt_tokens is None:
        return None
    if not 1 <= prompt_tokens <= MAX_PROMPT_TOKENS:
        return None
    return ModelUsage(context_version=version, prompt_tokens=prompt_tokens)


def _dropped(session_id: str, exc: InvalidArgumentError) -> None:
    """Re-raise ``exc`` unless the server refused the append for its usage report alone."""
    if not exc.field_violations or any(
        not v.field.startswith("usage") for v in exc.field_violations
    ):
        raise exc
    log.debug("usage for %s refused, appending without it: %s", session_id, exc)


def _taken(session_id: str, usage: ModelUsage, result: AppendResult) -> AppendResult:
    if result.usage_ignored_reason:
        log.debug(
            "usage for version %d of %s not counted: %s",
            usage.context_version,
            session_id,
            result.usage_ignored_reason,
        )
    return result


_KEPT_CHARS = 1_000


def stand_in(event: Event) -> Event:
    """What is stored of an event past the service's ``max_event_bytes``.

    Its id, role, place and tool structure, so the log stays whole and every
    call keeps its result; its text and each result cut to their first
    characters and a note of what was left out; its parts (images, files) and
    reasoning left out. While it is in the window the frameworks hand the
    model their own message; a summary sees the stand-in.
    """
    size = event.content_bytes()
    note = f"[not stored: this event held {size} bytes, past the service's max_event_bytes]"

    def cut(text: str) -> str:
        return f"{text[:_KEPT_CHARS]}… {note}" if len(text) > _KEPT_CHARS else text

    text = cut(event.text)
    if (event.parts or event.reasoning or not event.text) and note not in text:
        text = f"{text} {note}".strip()
    return replace(
        event,
        text=text,
        tool_calls=tuple(
            c if len(c.arguments_json) <= _KEPT_CHARS else replace(c, arguments_json="{}")
            for c in event.tool_calls
        ),
        tool_results=tuple(replace(r, content=cut(r.content)) for r in event.tool_results),
        parts=(),
        reasoning=(),
        metadata={**event.metadata, STAND_IN_KEY: str(size)},
    )


def _stood_in(session_id: str, events: list[Event], exc: ResourceExhaustedError) -> list[Event]:
    """``events`` with the largest one not stood in yet replaced by its stand-in; ``exc``
    raised again when the limit met was not ``max_event_bytes``, or none is left."""
    left = [i for i, e in enumerate(events) if STAND_IN_KEY not in e.metadata]
    if "max_event_bytes" not in exc.limits or not left:
        raise exc
    largest = max(left, key=lambda i: events[i].content_bytes())
    event = events[largest]
    log.warning(
        "event %s of %s holds %d bytes, past the service's max_event_bytes: stored as a"
        " stand-in (raise --max-event-bytes to store it whole)",
        event.id,
        session_id,
        event.content_bytes(),
    )
    return [*events[:largest], stand_in(event), *events[largest + 1 :]]


async def append_reporting(
    handle: SessionHandle,
    events: Sequence[Event],
    usage: ModelUsage | None,
    *,
    label_updates: Sequence[LabelUpdate] = (),
    stand_ins: bool = False,
) -> AppendResult:
    """Append ``events`` with ``usage``; refused for the report alone, append them without it.

    ``stand_ins``: an event past the service's ``max_event_bytes`` is stored as its
    stand-in (``stand_in``). For a mirror, whose framework keeps the event itself: the
    frameworks store any event, and refusing it would fail every call after.
    """
    batch = list(events)
    while True:
        try:
            return await _append_reporting(handle, batch, usage, label_updates)
        except ResourceExhaustedError as exc:
            if not stand_ins:
                raise
            batch = _stood_in(handle.session_id, batch, exc)


async def _append_reporting(
    handle: SessionHandle,
    events: Sequence[Event],
    usage: ModelUsage | None,
    label_updates: Sequence[LabelUpdate],
) -> AppendResult:
    if usage is not None:
        try:
            appended = await handle.append(events, label_updates=label_updates, usage=usage)
            return _taken(handle.session_id, usage, appended)
        except InvalidArgumentError as exc:
            _dropped(handle.session_id, exc)
    return await handle.append(events, label_updates=label_updates)


def append_reporting_sync(
    handle: SyncSessionHandle,
    events: Sequence[Event],
    usage: ModelUsage | None,
    *,
    stand_ins: bool = False,
) -> AppendResult:
    """``append_reporting`` for the blocking client."""
    batch = list(events)
    while True:
        try:
            return _append_reporting_sync(handle, batch, usage)
        except ResourceExhaustedError as exc:
            if not stand_ins:
                raise
            batch = _stood_in(handle.session_id, batch, exc)


def _append_reporting_sync(
    handle: SyncSessionHandle, events: Sequence[Event], usage: ModelUsage | None
) -> AppendResult:
    if usage is not None:
        try:
            return _taken(handle.session_id, usage, handle.append(events, usage=usage))
        except InvalidArgumentError as exc:
            _dropped(handle.session_id, exc)
    return handle.append(events)
