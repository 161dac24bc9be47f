"""What the client's calls return, beyond the domain's own Event, Session and CompactionResult.

Plain frozen dataclasses, the same for the asyncio and the sync client.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.client.errors import ClientError
from sidecar.model import CompactionResult, Event, Session
from sidecar.providers.profiles import ModelProfile


@dataclass(frozen=True, slots=True)
class SessionInfo(Session):
    """A session as the server answers it: the domain's header, and its model's profile.

    ``model_profile`` is the server's profile of ``model`` (provider, input
    window, output reserve: what a ``context_fraction`` trigger is a fraction
    of), None when the session names no model. The server may know models
    this client's built-in table does not (``--model-profiles``), so it is
    read from the answer, never looked up here. ``active_tokens_estimated``:
    ``counters.tokens`` includes estimates, events whose exact count the
    server has not landed yet (issue 37).
    """

    model_profile: ModelProfile | None = None
    active_tokens_estimated: bool = False


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append stored, and what it set off.

    ``events`` are the events as stored, with their positions (a retried id
    returns the original). ``compaction`` is set when the append compacted the
    session inline (window strategies); ``compaction_scheduled`` when a
    summarizing pass started in the background, whose result arrives on
    ``stream()`` and ``watch()``.
    """

    events: tuple[Event, ...]
    version: int
    compaction: CompactionResult | None = None
    compaction_scheduled: bool = False
    content_omitted: bool = False
    """``events`` came without their content (you sent it): the answer would have been
    larger than the server's message limit. They were stored."""
    usage_ignored_reason: str = ""
    """Why the append's ``usage`` was not taken into the session's calibration, when it
    was not (e.g. the estimate of its context version is no longer kept). Never an
    error: the events were stored."""


@dataclass(frozen=True, slots=True)
class SessionContext:
    """The compacted context to send to the model: the active window, in log order.

    ``estimated_prompt_tokens`` is ``token_count`` times the session's
    calibration factor: what the provider is expected to report for it.
    ``rendered_json`` is the window as the requested provider's request
    fragment (``context(format=...)``), "" when none was asked. A window too
    large for one answer, which ``context()`` reads in parts, is rendered by
    the client with the server's renderer, so it reads the same.

    ``cache_prefix_id`` changes exactly when the bytes a provider caches of
    the window's stable prefix change: a compaction, clearing or restore, a
    new system message, a late result for a call in the prefix (use it as
    OpenAI's ``prompt_cache_key``); the first
    ``stable_prefix_events`` events (``stable_prefix_tokens`` tokens) are
    what every window with that id starts with: where a cache breakpoint
    that lasts until the next change goes.

    ``token_count_estimated`` (and ``stable_prefix_tokens_estimated``): the
    count includes estimates, events whose exact count the server has not
    landed yet; each such event has ``token_count_estimated`` set too. Every
    compaction decision is the one exact counting makes all the same.
    """

    events: tuple[Event, ...]
    version: int
    token_count: int
    turn_count: int
    rendered_json: str = ""
    estimated_prompt_tokens: int = 0
    cache_prefix_id: str = ""
    stable_prefix_tokens: int = 0
    stable_prefix_events: int = 0
    token_count_estimated: bool = False
    stable_prefix_tokens_estimated: bool = False

    def shows(self, events: tuple[Event, ...]) -> bool:
        """Whether ``events`` are this window's events as it listed them (content aside).

        Ids alone are not enough: a clearing changes events in place, keeping
        their ids, and sets their flag and token count. A count that was an
        estimate on either side is not compared: the exact one may have landed
        in between, which changes no version and nothing the model is sent.
        """
        return len(events) == len(self.events) and all(
            (a.id, a.cleared) == (b.id, b.cleared)
            and (
                a.token_count == b.token_count or a.token_count_estimated or b.token_count_estimated
            )
            for a, b in zip(events, self.events, strict=True)
        )


@dataclass(frozen=True, slots=True)
class Missed:
    """A watcher fell behind and ``count`` compaction results were dropped for it."""

    count: int


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result; ``snippet`` is the matching text with the terms marked."""

    session_id: str
    event: Event
    rank: float
    snippet: str
    archived_by: str = ""
    """The compaction that archived the event (``list_compactions``); "" when active."""


@dataclass(frozen=True, slots=True)
class Ack:
    """A stream's append of ``request_id`` succeeded."""

    request_id: str
    session_id: str
    result: AppendResult


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """A stream's append of ``request_id`` failed; nothing of it was stored, the stream goes on."""

    request_id: str
    session_id: str
    error: ClientError


@dataclass(frozen=True, slots=True)
class BackgroundCompaction:
    """A background compaction of a session the stream appended to landed, or ended without
    landing one (``result.compacted`` false: failed, superseded, nothing to compact)."""

    session_id: str
    result: CompactionResult


StreamMessage = Ack | RequestFailed | BackgroundCompaction
