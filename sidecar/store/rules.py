"""The rules every store applies to a write, free of SQL: one place, both stores.

An append sorts its batch into retries and new events and checks the
version; a compaction plan is checked against the window it is applied to;
each write produces the session header that follows it. The stores only read
what these functions need and write what they return.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from sidecar.errors import EventConflict, InvalidArgument, LimitExceeded, VersionConflict
from sidecar.model import (
    CompactionPlan,
    Event,
    LabelUpdate,
    Session,
    SessionCounters,
    TokenCalibration,
    UsageReport,
)
from sidecar.store.protocol import SearchHit


def last_position(through: int | None) -> int:
    """The last position a read of pending counts covers: ``through``, or with none, the
    largest a position column holds (so one statement, on the ``events_pending`` index,
    serves both)."""
    return (1 << 63) - 1 if through is None else through


def require_ids(events: Sequence[Event]) -> None:
    """Every event of a batch reaching a store has its id (the engine assigns missing ones)."""
    for index, event in enumerate(events):
        if not event.id:
            raise InvalidArgument(f"events[{index}].id", "must not be empty")


def check_version(session: Session, expected_version: int | None) -> None:
    if expected_version is not None and expected_version != session.version:
        raise VersionConflict(
            f"session {session.session_id!r} is at version {session.version},"
            f" not {expected_version}",
            current_version=session.version,
        )


def check_absent_version(session_id: str, expected_version: int | None) -> None:
    """An absent session, about to be created by an append, is at version 0."""
    if expected_version not in (None, 0):
        raise VersionConflict(
            f"session {session_id!r} does not exist yet (version 0),"
            f" not version {expected_version}",
            current_version=0,
        )


PAGE_ITEM_OVERHEAD = 128
"""What an event costs on the wire beyond its content: ids, numbers, field tags."""


def fitting(events: Sequence[Event], max_bytes: int | None) -> int:
    """How many of ``events``, from the first, fit in ``max_bytes`` (always at least one).

    A page bounded only by count can pass the message limit (twenty 0.9 MB
    images), and then no page of that listing could ever be read.
    """
    return fitting_sizes([event.content_bytes() for event in events], max_bytes)


def fitting_hits(hits: Sequence[SearchHit], max_bytes: int | None) -> int:
    """How many search hits, from the first, fit in ``max_bytes`` (always at least one).

    A hit carries its whole event, and its snippet and session id besides.
    """
    return fitting_sizes(
        [h.event.content_bytes() + len(h.snippet.encode()) + len(h.session_id) for h in hits],
        max_bytes,
    )


def fitting_sizes(sizes: Sequence[int], max_bytes: int | None) -> int:
    """How many items of these content sizes, from the first, fit in ``max_bytes`` (one or more)."""
    if max_bytes is None:
        return len(sizes)
    total = 0
    for index, size in enumerate(sizes):
        total += size + PAGE_ITEM_OVERHEAD
        if total > max_bytes and index > 0:
            return index
    return len(sizes)


def split_label_updates(
    session_id: str, updates: Sequence[LabelUpdate]
) -> tuple[LabelUpdate | None, list[LabelUpdate]]:
    """The appended session's own update, and the other sessions' in id order (lock order)."""
    own: LabelUpdate | None = None
    others: list[LabelUpdate] = []
    for update in updates:
        if update.session_id in ("", session_id):
            own = update
        else:
            others.append(update)
    return own, sorted(others, key=lambda u: u.session_id)


def labels_after(
    session_id: str, session: Session | None, update: LabelUpdate, max_labels: int
) -> dict[str, str]:
    """A session's labels after ``update`` (``session`` None: absent, at version 0).

    Refused, so that the whole append is, when the session is not at the
    update's expected version or would end up with too many labels.
    """
    version = session.version if session is not None else 0
    if update.expected_version is not None and update.expected_version != version:
        raise VersionConflict(
            f"label_updates: session {session_id!r} is at version {version},"
            f" not {update.expected_version}",
            current_version=version,
        )
    labels = update.applied_to(session.labels if session is not None else {})
    if len(labels) > max_labels:
        raise LimitExceeded(
            "max_labels",
            f"label_updates: session {session_id!r} would have {len(labels)} labels,"
            f" the limit is {max_labels}",
        )
    return labels


@dataclass(frozen=True, slots=True)
class SortedBatch:
    """A batch split into what is already stored and what is new."""

    result: tuple[Event, ...]
    """The batch as stored, one to one with the request: retries as first stored."""
    new: tuple[Event, ...]
    """The events to insert, with their positions."""
    counters: SessionCounters
    """The session's counters once ``new`` is stored."""


def sort_batch(
    session: Session, events: Sequence[Event], stored: Mapping[str, Event]
) -> SortedBatch:
    """Retries and new events (see ``Store.append``); EventConflict for a changed payload.

    ``stored`` holds the session's events with the batch's ids. A later event
    of the batch with the id of an earlier one is a retry of it.
    """
    known = dict(stored)
    result: list[Event] = []
    new: list[Event] = []
    counters = session.counters
    for event in events:
        prior = known.get(event.id)
        if prior is not None:
            if not prior.same_payload(event):
                raise EventConflict(session.session_id, event.id)
            result.append(prior)
            continue
        event = event.evolve(position=session.total_events + len(new) + 1, archived=False)
        known[event.id] = event
        new.append(event)
        result.append(event)
        counters = counters.after_append(event)
    return SortedBatch(tuple(result), tuple(new), counters)


def counts_usage(session: Session, batch: SortedBatch, usage: UsageReport | None) -> bool:
    """Whether an append's usage report calibrates ``session`` (its header before the append).

    Only with new events (a retried append, which writes nothing, does not
    count its report twice), and only a report of this incarnation and a
    version it has reached.
    """
    return usage is not None and bool(batch.new) and usage.counts_for(session)


def after_append(
    session: Session,
    batch: SortedBatch,
    now: datetime,
    usage: UsageReport | None = None,
    labels: Mapping[str, str] | None = None,
) -> Session:
    """The header after an append; ``usage`` (reported / estimated) calibrates it, as
    ``counts_usage`` says; ``labels``, when given, are its labels after it.

    One ``replace`` of the header: on a stream's appends to many sessions each
    costs about 6 us of the writer's time.
    """
    calibration = session.calibration
    if usage is not None and counts_usage(session, batch, usage):
        calibration = calibration.after_report(usage.ratio)
    return replace(
        session,
        version=session.version + 1,
        update_time=now,
        counters=batch.counters,
        total_events=session.total_events + len(batch.new),
        calibration=calibration,
        labels=session.labels if labels is None else labels,
    )


def after_update(
    session: Session,
    *,
    policy_json: str | None,
    set_policy: bool,
    labels: Mapping[str, str] | None,
    model: str | None,
    now: datetime,
) -> Session | None:
    """The header after an UpdateSession; None when it asks to change nothing (nothing written).

    Another model starts the calibration anew: the factor is how one
    provider's tokenizer counts against ours, and says nothing of another's.
    """
    if not set_policy and labels is None and model is None:
        return None
    calibration = session.calibration
    if model is not None and model != session.model:
        calibration = TokenCalibration()
    return replace(
        session,
        version=session.version + 1,
        update_time=now,
        policy_json=policy_json if set_policy else session.policy_json,
        labels=dict(labels) if labels is not None else session.labels,
        model=model if model is not None else session.model,
        calibration=calibration,
        # A restore's pause lasts until the policy is next set.
        auto_compaction_paused=session.auto_compaction_paused and not set_policy,
    )


def check_plan_shape(plan: CompactionPlan) -> None:
    """Plans a store cannot place are a caller's bug, not a conflict."""
    if plan.is_empty:
        raise ValueError("an empty compaction plan writes nothing; do not apply it")
    if plan.inserts and plan.insert_before is None:
        raise ValueError("a plan with inserts must say which event they go before")


def check_plan(
    session: Session, plan: CompactionPlan, window: Sequence[Event]
) -> tuple[tuple[Event, ...], Event | None]:
    """What the plan archives (as archived events) and the event it inserts before.

    ``window`` is the active window, or only the plan's own events that are
    still active (archived, inserted before, cleared), in log order: the
    stores look those up by id instead of reading the window. Rejected with
    VersionConflict when another compaction landed since the plan's base, an
    event it archives or clears is no longer active, or its ``insert_before``
    is not, or the session is another incarnation than the plan's (deleted and
    created again under its id). Only the plan's own events are checked, so events appended after
    the plan was made do not make it fail.
    """

    def conflict(reason: str) -> VersionConflict:
        return VersionConflict(
            f"compaction plan for session {session.session_id!r} is stale: {reason}",
            current_version=session.version,
        )

    if plan.base_incarnation is not None and session.incarnation != plan.base_incarnation:
        raise conflict("the session was deleted and created again since the plan was made")
    if session.last_compaction_id != plan.base_compaction_id:
        raise conflict(
            f"compaction {session.last_compaction_id!r} landed after"
            f" {plan.base_compaction_id!r}, which the plan was made from"
        )
    wanted = set(plan.archive_ids)
    archived = tuple(e.evolve(archived=True) for e in window if e.id in wanted)
    if len(archived) != len(wanted):
        missing = sorted(wanted - {e.id for e in archived})
        raise conflict(f"events {missing[:5]} are no longer active")
    target = next((e for e in window if e.id == plan.insert_before), None)
    if plan.insert_before is not None and target is None:
        raise conflict(f"event {plan.insert_before!r} to insert before is no longer active")
    active = {e.id for e in window}
    gone = [e.id for e in plan.clears if e.id not in active or e.id in wanted]
    if gone:
        raise conflict(f"events {sorted(gone)[:5]} to clear are no longer active")
    return archived, target


def check_insert_slot(target: Event, sort_key: int) -> None:
    """Only an appended event (sort key 2p+1) has a free slot right before it (2p)."""
    if sort_key != 2 * target.position + 1:
        raise ValueError(f"cannot insert before {target.id!r}: a compaction wrote it")


def placed_inserts(
    session: Session, plan: CompactionPlan, taken: Collection[str]
) -> tuple[Event, ...]:
    """The plan's new events with their positions; EventConflict if an id is taken."""
    if taken or len({e.id for e in plan.inserts}) != len(plan.inserts):
        raise EventConflict(session.session_id, next(iter(taken), plan.inserts[0].id))
    return tuple(
        event.evolve(position=session.total_events + offset, synthetic=True)
        for offset, event in enumerate(plan.inserts, start=1)
    )


def after_compaction(
    session: Session,
    plan: CompactionPlan,
    window: SessionCounters,
    compaction_id: str,
    now: datetime,
) -> Session:
    """The header after a landed plan; ``window`` holds the counters of the window it
    leaves (``window_counters``), which is the new stable prefix."""
    if plan.archive_ids or plan.inserts:  # as SessionCounters.after_compaction
        counters = replace(window, turns_since_compaction=1 if window.turns else 0)
    else:  # as SessionCounters.after_clearing
        counters = replace(window, turns_since_compaction=session.counters.turns_since_compaction)
    return replace(
        session,
        version=session.version + 1,
        update_time=now,
        counters=counters,
        total_events=session.total_events + len(plan.inserts),
        last_compaction_id=compaction_id,
        stable_prefix_tokens=counters.tokens,
        stable_prefix_events=counters.active_events,
    )
