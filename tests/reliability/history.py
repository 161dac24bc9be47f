"""What the clients were told, and a checker that holds the server to it.

Clients record every operation that completed: its session, its client, when
it started and ended (monotonic clock), the version it saw, the event ids an
append acknowledged, and what a GetContext returned. They also record the ids
they sent but were refused (a conditional append that lost its version check,
a batch with one bad event): those must never be stored.

``check_history`` then reads each session's whole log through the API and its
compaction audit trail from the SQLite file (which version archived which
event, which version inserted which summary), and verifies:

- every acknowledged event is stored exactly once; nothing refused is stored;
  nothing is stored that was never sent;
- positions are dense (1..N), and each client's events sit in the order their
  appends were acknowledged;
- versions only grow: no operation sees a version older than one an operation
  that finished before it started had already seen;
- archived + active == everything: ``ListEvents(active_only)``, ``GetContext``
  and the session's counters agree with the flags of the whole log;
- tool pairs are never split (archived together, kept together);
- every GetContext read was a consistent snapshot at its version: exactly the
  events of the log at that version that no compaction up to that version had
  archived (acknowledged ones included, summaries included), in log order, with
  token_count and turn_count matching the events returned.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2


@dataclass(frozen=True, slots=True)
class SeenEvent:
    """The parts of an event a snapshot check needs."""

    id: str
    role: int
    synthetic: bool
    token_count: int
    call_ids: tuple[str, ...]
    result_call_ids: tuple[str, ...]

    @staticmethod
    def of(event: event_pb2.Event) -> SeenEvent:
        return SeenEvent(
            id=event.id,
            role=event.role,
            synthetic=event.synthetic,
            token_count=event.token_count,
            call_ids=tuple(c.id for c in event.tool_calls),
            result_call_ids=tuple(r.call_id for r in event.tool_results),
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one GetContext returned."""

    events: tuple[SeenEvent, ...]
    token_count: int
    turn_count: int


@dataclass(frozen=True, slots=True)
class Op:
    """One completed operation, as its client saw it."""

    client: str
    session: str
    kind: str  # append | context | compact
    start: float
    end: float
    version: int
    acked: tuple[str, ...] = ()
    snapshot: Snapshot | None = None


@dataclass
class History:
    """Everything the clients of one run were told."""

    ops: list[Op] = field(default_factory=list)
    sent: dict[str, set[str]] = field(default_factory=dict)
    refused: dict[str, set[str]] = field(default_factory=dict)
    lost_acks: int = 0
    unavailable: int = 0

    def record(self, op: Op) -> None:
        self.ops.append(op)

    def send(self, session: str, ids: list[str]) -> None:
        self.sent.setdefault(session, set()).update(ids)

    def refuse(self, session: str, ids: list[str]) -> None:
        self.refused.setdefault(session, set()).update(ids)

    def sessions(self) -> list[str]:
        return sorted({op.session for op in self.ops} | set(self.sent))

    def acked(self, session: str) -> list[str]:
        return [i for op in self.ops if op.session == session for i in op.acked]


@dataclass(frozen=True, slots=True)
class AuditTrail:
    """One session's compactions as stored: the version each archived or inserted what."""

    archived_at: dict[str, int]
    inserted_at: dict[str, int]
    inserted: list[tuple[int, tuple[str, ...]]]
    versions_before: list[int]
    archived_ids: list[str]


def audit_trail(db_path: Path, session: str) -> AuditTrail:
    """Read the session's compaction records straight from the SQLite file (read-only)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT c.version_before, c.version_after, c.archived_ids, c.inserted_ids"
            " FROM compactions c JOIN sessions s ON s.pk = c.session"
            " WHERE s.id = ? ORDER BY c.pk",
            (session,),
        ).fetchall()
    finally:
        db.close()
    archived_at: dict[str, int] = {}
    inserted_at: dict[str, int] = {}
    inserted: list[tuple[int, tuple[str, ...]]] = []
    archived_ids: list[str] = []
    for _, after, archived_json, inserted_json in rows:
        for event_id in json.loads(archived_json):
            archived_at[event_id] = after
            archived_ids.append(event_id)
        ids = tuple(json.loads(inserted_json))
        inserted.append((after, ids))
        for event_id in ids:
            inserted_at[event_id] = after
    return AuditTrail(archived_at, inserted_at, inserted, [r[0] for r in rows], archived_ids)


async def read_log(stub: Any, session: str, *, active_only: bool = False) -> list[event_pb2.Event]:
    """The session's whole log (or active window), every page, in log order."""
    log: list[event_pb2.Event] = []
    token = ""
    while True:
        page = await stub.ListEvents(
            pb.ListEventsRequest(
                session_id=session, page_size=500, page_token=token, active_only=active_only
            ),
            timeout=30,
        )
        log += page.events
        token = page.next_page_token
        if not token:
            return log


@dataclass
class CheckReport:
    """What a check covered, for the figures."""

    sessions: int = 0
    operations: int = 0
    snapshots: int = 0
    acknowledged: int = 0


def _pairs_whole(events: list[SeenEvent], where: str) -> None:
    """Within ``events``: every tool result's call is present, and every call's result."""
    calls = {c for e in events for c in e.call_ids}
    results = {c for e in events for c in e.result_call_ids}
    assert results <= calls, f"{where}: tool results without their call: {sorted(results - calls)}"
    assert calls <= results, f"{where}: tool calls without their result: {sorted(calls - results)}"


def _check_versions_grow(session: str, ops: list[Op]) -> None:
    """Per client non-decreasing; across clients, never older than what had finished before."""
    by_client: dict[str, list[int]] = {}
    for op in sorted(ops, key=lambda o: o.start):
        by_client.setdefault(op.client, []).append(op.version)
    for client, versions in by_client.items():
        assert versions == sorted(versions), f"{session}/{client}: versions went back: {versions}"
    finished = sorted(ops, key=lambda o: o.end)
    ends = [o.end for o in finished]
    highest: list[int] = []
    for o in finished:
        highest.append(max(o.version, highest[-1] if highest else 0))
    for op in ops:
        done_before = bisect.bisect_left(ends, op.start)
        if done_before:
            floor = highest[done_before - 1]
            assert op.version >= floor, (
                f"{session}/{op.client}: {op.kind} saw version {op.version} after an operation"
                f" that had finished before it started saw {floor}"
            )


def _check_snapshot(
    session: str,
    op: Op,
    order: dict[str, int],
    trail: AuditTrail,
    acked_by_version: list[tuple[int, str]],
) -> None:
    """The events of the log at ``op.version`` that no compaction up to it had archived."""
    assert op.snapshot is not None
    snap = op.snapshot
    v = op.version
    where = f"{session}: GetContext at version {v} by {op.client}"
    ids = [e.id for e in snap.events]
    assert len(ids) == len(set(ids)), f"{where}: an event twice"
    assert all(i in order for i in ids), f"{where}: events not in the log"
    assert [order[i] for i in ids] == sorted(order[i] for i in ids), f"{where}: out of log order"
    for i in ids:
        archived = trail.archived_at.get(i)
        assert archived is None or archived > v, f"{where}: {i} was archived at version {archived}"
        inserted = trail.inserted_at.get(i)
        assert inserted is None or inserted <= v, f"{where}: {i} was only inserted at {inserted}"
    shown = set(ids)
    for version, event_id in acked_by_version:
        if version > v:
            break
        archived = trail.archived_at.get(event_id)
        assert event_id in shown or (archived is not None and archived <= v), (
            f"{where}: {event_id}, acknowledged at version {version}, is missing"
        )
    for version, inserted_ids in trail.inserted:
        if version > v:
            break
        for event_id in inserted_ids:
            archived = trail.archived_at.get(event_id)
            assert event_id in shown or (archived is not None and archived <= v), (
                f"{where}: summary {event_id} inserted at {version} is missing"
            )
    assert snap.token_count == sum(e.token_count for e in snap.events), f"{where}: token_count"
    turns = sum(1 for e in snap.events if e.role == event_pb2.ROLE_USER and not e.synthetic)
    assert snap.turn_count == turns, f"{where}: turn_count {snap.turn_count}, {turns} turns shown"
    _pairs_whole(list(snap.events), where)


async def check_session(
    stub: Any, session: str, history: History, db_path: Path, report: CheckReport
) -> None:
    log = await read_log(stub, session)
    ops = [op for op in history.ops if op.session == session]
    where = session
    # Every acknowledged event stored exactly once; nothing refused, nothing unsent.
    appended = [e for e in log if not e.synthetic]
    stored = Counter(e.id for e in appended)
    twice = [i for i, n in stored.items() if n > 1]
    assert not twice, f"{where}: stored twice: {twice[:5]}"
    acked = history.acked(session)
    missing = sorted(set(acked) - set(stored))
    assert not missing, f"{where}: {len(missing)} acknowledged events lost, e.g. {missing[:5]}"
    refused = sorted(history.refused.get(session, set()) & set(stored))
    assert not refused, f"{where}: refused events were stored: {refused[:5]}"
    unsent = sorted(set(stored) - history.sent.get(session, set()))
    assert not unsent, f"{where}: events nobody sent: {unsent[:5]}"
    # Dense positions; each client's events in acknowledgement order.
    positions = sorted(e.position for e in log)
    assert positions == list(range(1, len(log) + 1)), f"{where}: positions not dense"
    position = {e.id: e.position for e in log}
    order = {e.id: index for index, e in enumerate(log)}
    per_client: dict[str, list[str]] = {}
    for op in sorted(ops, key=lambda o: o.end):
        if op.acked:
            per_client.setdefault(op.client, []).extend(op.acked)
    for client, mine in per_client.items():
        seen = [position[i] for i in mine]
        assert seen == sorted(seen), f"{where}: {client}'s events are out of order"
    _check_versions_grow(session, ops)
    # Archived + active == everything, seen three ways.
    active = [e for e in log if not e.archived]
    active_read = await read_log(stub, session, active_only=True)
    assert [e.id for e in active_read] == [e.id for e in active], f"{where}: active_only differs"
    context = await stub.GetContext(pb.GetContextRequest(session_id=session), timeout=30)
    assert [e.id for e in context.events] == [e.id for e in active], f"{where}: context differs"
    header = await stub.GetSession(pb.GetSessionRequest(session_id=session), timeout=30)
    assert header.total_event_count == len(log), f"{where}: total_event_count"
    assert header.active_event_count == len(active), f"{where}: active_event_count"
    assert header.active_tokens == sum(e.token_count for e in active), f"{where}: active_tokens"
    assert context.version == header.version
    # The audit trail agrees with the flags; no two compactions from one version.
    trail = audit_trail(db_path, session)
    assert len(trail.archived_ids) == len(set(trail.archived_ids)), f"{where}: archived twice"
    assert len(trail.versions_before) == len(set(trail.versions_before)), (
        f"{where}: two compactions from one version"
    )
    flagged = {e.id for e in log if e.archived}
    assert flagged == set(trail.archived_ids), f"{where}: archived flags != audit trail"
    # Tool pairs archived together, kept together.
    _pairs_whole([SeenEvent.of(e) for e in active], f"{where}: the active window")
    # Every GetContext was a consistent snapshot at its version.
    acked_by_version = sorted((op.version, i) for op in ops for i in op.acked)
    snapshots = [op for op in ops if op.snapshot is not None]
    for op in snapshots:
        _check_snapshot(session, op, order, trail, acked_by_version)
    report.sessions += 1
    report.operations += len(ops)
    report.snapshots += len(snapshots)
    report.acknowledged += len(acked)


async def check_history(address: str, history: History, db_path: Path) -> CheckReport:
    """Run every check above on every session the clients touched."""
    report = CheckReport()
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        for session in history.sessions():
            await check_session(stub, session, history, db_path, report)
    return report
