"""The Store protocol: a versioned, append-only event log per session.

Two implementations (SQLite, the embedded default; PostgreSQL for several
replicas) are held to one contract suite, ``tests/store/test_contract.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from sidecar.compaction.head import WindowHead
from sidecar.model import (
    Cause,
    CompactionPlan,
    CompactionResult,
    Event,
    LabelUpdate,
    Role,
    Session,
    UsageReport,
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; an empty ``next_page_token`` means the last page."""

    items: tuple[T, ...]
    next_page_token: str = ""


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What an append stored: events as stored (a retry gets the original) and the session."""

    events: tuple[Event, ...]
    session: Session
    written: int
    usage_counted: bool = False
    """Whether the append's usage report was taken into the calibration."""


@dataclass(frozen=True, slots=True)
class PlainAppend:
    """One session's part of ``Store.append_many``: no version check, usage or label updates."""

    session_id: str
    events: tuple[Event, ...]
    create_if_missing: bool = False


@dataclass(frozen=True, slots=True)
class CountsLanded:
    """What ``Store.land_counts`` wrote: the session after it (same version), and each event
    whose exact count it set, as it was while pending (its estimate and bounds), with that
    count."""

    session: Session
    landed: tuple[tuple[Event, int], ...]


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    """A landed compaction: the session after it and what it archived.

    Not the new active window: the write costs what it changes, and the
    engine reads the window after it only when its result is to list it
    (``sidecar.engine.answer_window``)."""

    session: Session
    compaction_id: str
    archived: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """One entry of the audit trail of compactions."""

    compaction_id: str
    session_id: str
    version_before: int
    version_after: int
    strategy: str
    archived_ids: tuple[str, ...]
    inserted_ids: tuple[str, ...]
    tokens_saved: int
    summarizer_latency_ms: float
    summary_input_tokens: int
    summary_output_tokens: int
    create_time: datetime
    cleared_ids: tuple[str, ...] = ()
    cause: Cause = Cause.UNKNOWN
    restored_by: str = ""
    """The restore that undid this compaction; "" while it stands."""
    restores: str = ""
    """For a restore (strategy ``restore``): the compaction it undid."""
    restored_ids: tuple[str, ...] = ()
    """For a restore: the events it made active again or uncleared."""
    identifiers_dropped: int = 0
    """Its loss report: identifiers of what it archived or cleared the window lost."""
    dropped_identifiers: tuple[str, ...] = ()

    @property
    def is_restore(self) -> bool:
        return self.strategy == RESTORE_STRATEGY


RESTORE_STRATEGY = "restore"


@dataclass(frozen=True, slots=True)
class RestoreOutcome:
    """A landed restore: the session after it, its record's id, what it did (not the window,
    as for ``ApplyOutcome``)."""

    session: Session
    restore_id: str
    archived: tuple[Event, ...]
    """The summary turn the undone compaction had inserted, archived now."""
    restored_ids: tuple[str, ...]
    tokens_saved: int


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A full-text search over a session's (or every session's) log."""

    text: str
    session_id: str | None = None
    session_prefix: str = ""
    """Only sessions whose id starts with this (a tenant's namespace); "" for all."""
    roles: tuple[Role, ...] = ()
    include_active: bool = False
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A matching event with its session, a rank (higher is better) and a snippet."""

    session_id: str
    event: Event
    rank: float
    snippet: str
    archived_by: str = ""
    """The compaction that archived the event; "" for an active one."""


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Sessions whose labels include every pair of ``labels`` (and whose id starts with
    ``id_prefix``: a tenant's namespace)."""

    labels: Mapping[str, str] = field(default_factory=dict)
    id_prefix: str = ""


class Store(Protocol):
    """The versioned event log. Every write increments the session's version.

    Positions are dense in write order within a session. Log order (how
    windows and listings are sorted) is position order, except that events a
    compaction inserts sit right before the event they were inserted before.
    """

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise StoreUnavailable when the store cannot serve."""

    async def create_session(
        self,
        session_id: str,
        *,
        policy_json: str | None,
        labels: Mapping[str, str],
        model: str = "",
    ) -> Session:
        """Create an empty session; SessionExists if the id is taken."""

    async def get_session(self, session_id: str) -> Session:
        """SessionNotFound if absent."""

    async def update_session(
        self,
        session_id: str,
        *,
        policy_json: str | None = None,
        set_policy: bool = False,
        labels: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        model: str | None = None,
    ) -> Session:
        """Replace the policy (when ``set_policy``), the labels and/or the model (when not
        None); bumps the version. Asking to change nothing writes nothing."""

    async def list_sessions(
        self, filter: SessionFilter, *, page_size: int, page_token: str
    ) -> Page[Session]:
        """Sessions in id order, filtered by labels."""

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and its whole log; SessionNotFound if absent."""

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        *,
        expected_version: int | None = None,
        create_if_missing: bool = False,
        policy_json: str | None = None,
        label_updates: Sequence[LabelUpdate] = (),
        max_labels: int = 64,
        usage: UsageReport | None = None,
    ) -> AppendOutcome:
        """Append a batch in one transaction. Idempotent by event id.

        ``events`` come with ``token_count`` set, exact or, with ``token_bounds``,
        an estimate whose exact count lands later (``land_counts``); a
        non-synthetic system message comes counted. An id already stored with the
        same payload returns the stored event and writes nothing; with a
        different payload it raises EventConflict and nothing of the batch is
        written. A mismatching ``expected_version`` raises VersionConflict.
        With ``create_if_missing`` an absent session is created with
        ``policy_json``. Counters are kept exact in the same transaction, and
        so are ``label_updates`` (other sessions' created when absent); an
        update whose ``expected_version`` does not match raises
        VersionConflict, one leaving more than ``max_labels`` LimitExceeded,
        and nothing is written. A batch of retries only writes nothing.
        ``usage`` (a provider's reported prompt tokens over our estimate) is
        taken into the session's calibration in the same transaction, when
        the batch writes anything and the report is of this incarnation and
        a version it has reached (``UsageReport.counts_for``); the outcome's
        ``usage_counted`` says whether it was.
        """

    async def append_many(
        self, appends: Sequence[PlainAppend], *, policy_json: str | None = None
    ) -> list[AppendOutcome | Exception]:
        """Several sessions' appends, each as ``append`` would store it; an outcome each.

        The session ids are distinct. Each append stands alone: one that
        fails (its error in its place, an Exception) stores nothing, and the
        others are stored all the same. The point is cost: one call, and on
        SQLite a few transactions, where one ``append`` per session would
        each wait, commit and wake its caller on its own.
        """
        ...

    async def pending_counts(
        self, session_id: str, limit: int, *, through: int | None = None
    ) -> tuple[Session, tuple[Event, ...]]:
        """The session and up to ``limit`` of its events whose exact count is pending
        (``Event.token_bounds`` set), oldest first, with their content as appended;
        with ``through``, only those at that position or before (what a version
        holds). SessionNotFound if absent."""

    async def land_counts(
        self, session_id: str, exact: Mapping[str, int], *, incarnation: int | None = None
    ) -> CountsLanded:
        """Set the exact token counts of pending events, by id, in one transaction.

        ``incarnation``: the session's (``Session.incarnation``) as ``pending_counts``
        read it with the events counted. If the session is another one now
        (deleted and created again under its id, perhaps with the same event
        ids), the counts are of other content and nothing lands.

        The session's counters move by what each count changed for the window
        (an archived or cleared event's changes nothing there); the version and
        update time do not move, so no client's ``expected_version`` and no
        read cached by version is disturbed. An id not pending (counted
        already, here or by another replica; unknown) is left alone.
        SessionNotFound if absent.
        """

    async def active_window(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        """The session and its active (non-archived) events in log order; O(window).

        A cleared event comes as the window shows it: its placeholder, the
        placeholder's token count, ``cleared`` set.
        """

    async def window_head(
        self, session_id: str, events: int, *, count_calls: bool = False
    ) -> tuple[Session, WindowHead]:
        """The session and the first ``events`` events of its active window, in log order,
        with what the rest of it adds up to (``WindowHead``), in one snapshot.

        Costs the head and its own tool calls, looked up by index: nothing past
        the head is decoded. ``count_calls`` also counts the window's tool calls.
        """

    async def apply(self, session_id: str, plan: CompactionPlan) -> ApplyOutcome:
        """Apply a compaction plan in one transaction.

        Cleared events keep their original content in the log beside the
        cleared one the active window shows from then on.

        Rejected with VersionConflict when another compaction landed since
        ``plan.base_compaction_id`` or an event it archives is no longer active
        (or ``insert_before`` is not active). Events appended after the plan was
        made do not make it fail. Must not be called with an empty plan.
        """

    async def list_events(
        self,
        session_id: str,
        *,
        page_size: int,
        page_token: str,
        include_archived: bool = True,
        max_bytes: int | None = None,
    ) -> Page[Event]:
        """The whole log in log order, archived events included unless told otherwise.

        A cleared event comes with its original content and count, ``cleared``
        set; without archived events the listing is the active window as
        ``active_window`` gives it (placeholders), so that a window read in
        pages is the one the model is sent.

        A page also stops before its events' content passes ``max_bytes``
        (holding at least one event), continuing from there on the next page.
        """

    async def search(
        self,
        query: SearchQuery,
        *,
        page_size: int,
        page_token: str,
        timeout_s: float | None = None,
        max_bytes: int | None = None,
    ) -> Page[SearchHit]:
        """Full-text search, best rank first. Archived events always; active ones if asked.

        The query's terms are bounded (``search_terms``: InvalidArgument past
        them). The search stops once ``timeout_s`` has passed (TimeoutError),
        waiting for a connection included, and at once when its caller is
        cancelled; searches never take the connections other reads need. A
        page also stops before its hits' content passes ``max_bytes`` (holding
        at least one hit), continuing from there on the next page.
        """

    async def list_compactions(
        self,
        session_id: str,
        *,
        page_size: int,
        page_token: str,
        newest_first: bool = False,
        max_bytes: int | None = None,
    ) -> Page[CompactionRecord]:
        """The session's compaction history, oldest first (``newest_first``: newest first).

        A page also stops before its records' ids pass ``max_bytes`` (holding
        at least one record), continuing from there on the next page.
        """

    async def restore(
        self,
        session_id: str,
        compaction_id: str,
        *,
        expected_version: int | None = None,
        pause_auto_compaction: bool = False,
    ) -> RestoreOutcome:
        """Undo the newest compaction not yet restored, in one transaction.

        What it archived is active again in place, what it cleared is
        uncleared, what it inserted (a summary turn) is archived; nothing is
        deleted. ``compaction_id`` "" means that compaction; naming another
        raises FailedPrecondition naming the one to restore first (an absent
        id: CompactionNotFound). The restore is recorded as a compaction of
        its own (strategy ``restore``), which becomes the session's last
        compaction, so a plan made before it no longer lands. Counters are
        recomputed from the window; ``turns_since_compaction`` is what it was
        before the undone compaction, plus the turns appended since.
        """

    async def compaction_record(self, session_id: str, compaction_id: str) -> CompactionRecord:
        """One entry of the history, by its id, its id lists whole (ListCompactions reads
        them page by page); CompactionNotFound when there is none."""

    async def compaction_result(self, session_id: str, compaction_id: str) -> CompactionResult:
        """A landed compaction as a result: what it archived, cleared or restored.

        Without the active window: the engine reads it after, when the
        result is to list it (``sidecar.engine.answer_window``).

        SessionNotFound if the session is absent; KeyError if it has no such compaction.
        """
