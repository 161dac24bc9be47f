"""What we estimated each recent context at: the denominator of a usage report.

An agent reads the context of version v, calls its model, and appends the
model's answer with the prompt tokens the provider reported for that call
(``ModelUsage``). The report is worth something only against our estimate
of that same context, so the estimate of every version this replica handed
out (GetContext) or produced (an append's acknowledgement) is kept here for a
while: the last ``PER_SESSION`` versions of each of the last ``MAX_SESSIONS``
sessions, least recently used out first. Bounded in bytes by those counts
(a version is five 64-bit integers in its session's array, a session about
320 bytes with its key and one version), so a few MB at most.

A report whose version is no longer here (too old, or made on another
replica, or before a restart) is ignored with a reason, never an error: the
calibration is an average over many reports, and one missing costs nothing.

Estimates are kept per incarnation (``Session.incarnation``): a session
deleted and created again under its id starts with none, here when it is
deleted or first seen again, and in the store, which takes a report in only
for the incarnation and a version the session has reached
(``UsageReport.counts_for``), whichever replica kept the estimate.

A version's context handed out while some of its events were only estimated
(issue 37: ``SessionCounters.tokens_exact``) is kept with how far it can be
off and the positions it held (every event up to the session's
``total_events`` then). When this replica lands those events' exact counts
(``counted``), every kept version that held them moves by what they changed,
and is exact once none of its events is pending: a report is only ever held
against an exact count, as it was before counts could wait.

A landing is a write of its own, and reads run beside it: a read may see the
session before the landing's write or after it, and be kept before this
replica hears of the landing or after. Each landing must move each kept
estimate exactly once, if and only if the read it came from did not see it.
What a read saw is told by what it read, with no clock and no landing number
in the store: a landing bumps no version (every other write does) and lowers
the window's pending slack (``pending_below + pending_above``) by that of the
events it counts, and nothing else changes a version's counters. So the
states a session goes through are ordered by (version, -slack): at one
version, each landing leaves less slack than the state before it, and a
landing that leaves as much changed nothing (its events' bounds were one
number, or they were out of the window). A read saw a landing's write if and
only if it read a later version than the landing wrote at, or the same
version with no more slack than the landing left. This replica's landings of
one session are written and heard one at a time (``ExactCounts`` holds a
landing per session), so:

- when a landing is heard (``counted``), a kept estimate of an older version
  was read before it and moves by the landed events it holds; one of the
  same version moves to the state the landing left unless it is there
  already; one of a newer version saw it;
- when a read is kept (``note``), it is dropped if it did not see the last
  landing heard (the estimate kept stays): that landing has moved the
  estimates already, and which of its events the read held is not known.
  An exact read is always kept: nothing moves it.

Per session, that costs the last landing's version and slack, beside the
estimates. An estimate read before a landing of another replica is not moved
by it (this replica does not hear of it): it stays estimated, and a report
held against it is ignored (``ESTIMATED`` in ``session_model``).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sidecar.model import Session

MAX_SESSIONS = 4096
PER_SESSION = 8

# Offsets in a kept version's row (``_Kept.rows``), after the version itself.
_TOKENS, _BELOW, _ABOVE, _THROUGH = range(1, 5)
_WIDTH = 5


@dataclass(frozen=True, slots=True)
class KeptEstimate:
    """A version's kept estimate: the incarnation it is of, its tokens, how far below and
    above them its exact count can lie, and the highest position it holds."""

    incarnation: int
    tokens: int
    below: int
    above: int
    through: int

    @property
    def exact(self) -> bool:
        """Whether ``tokens`` is the exact count: none of its events is pending."""
        return self.below == 0 and self.above == 0


class _Kept:
    """One session's incarnation, its versions' estimates, and the last landing heard of.

    The estimates are packed in one array of 64-bit integers, ``_WIDTH`` a
    version (the version, then an entry). A dict of lists cost 160 bytes a
    session more: 1.95 against 1.29 MiB for the ``MAX_SESSIONS`` sessions
    the memory benchmark leaves (tracemalloc), and 58.6-59.0 against
    57.4-57.9 MiB of RSS after its 10,000 sessions.
    """

    __slots__ = ("incarnation", "landed_slack", "landed_version", "rows")

    def __init__(self, incarnation: int) -> None:
        self.incarnation = incarnation
        # Per version kept: the version, its tokens, pending below, pending above, and
        # the highest position it holds.
        self.rows = array("q")
        self.landed_version = 0  # the last landing heard of: the version it wrote at,
        self.landed_slack = 0  # and the slack it left there

    def saw_last_landing(self, version: int, slack: int) -> bool:
        """Whether a read of ``version`` with ``slack`` saw the last landing heard of."""
        return version > self.landed_version or (
            version == self.landed_version and slack <= self.landed_slack
        )

    def _at(self, version: int) -> int:
        """Where ``version``'s row starts, or -1 when it is not kept."""
        rows = self.rows
        for start in range(0, len(rows), _WIDTH):
            if rows[start] == version:
                return start
        return -1

    def get(self, version: int) -> tuple[int, ...] | None:
        """``version``'s entry (tokens, below, above, through), or None."""
        start = self._at(version)
        return None if start < 0 else tuple(self.rows[start + 1 : start + _WIDTH])

    def slack_at(self, version: int) -> int | None:
        """How far ``version``'s kept tokens can be off, both ways; None when not kept."""
        start = self._at(version)
        return None if start < 0 else self.rows[start + _BELOW] + self.rows[start + _ABOVE]

    def keep(self, version: int, entry: Sequence[int], per_session: int) -> None:
        rows = self.rows
        start = self._at(version)
        if start >= 0:
            rows[start + 1 : start + _WIDTH] = array("q", entry)
            return
        rows.append(version)
        rows.extend(entry)
        if len(rows) > per_session * _WIDTH:
            oldest = min(range(0, len(rows), _WIDTH), key=rows.__getitem__)
            del rows[oldest : oldest + _WIDTH]

    def move(self, before: int, landed: Sequence[tuple[int, int, int, int]]) -> None:
        """Move every kept version older than ``before`` that still had pending events by
        the ``landed`` events it holds: ``(position, tokens, below, above)`` each."""
        rows = self.rows
        for start in range(0, len(rows), _WIDTH):
            if rows[start] >= before or not (rows[start + _BELOW] or rows[start + _ABOVE]):
                continue
            for position, moved, below, above in landed:
                if position <= rows[start + _THROUGH]:
                    rows[start + _TOKENS] += moved
                    rows[start + _BELOW] -= below
                    rows[start + _ABOVE] -= above


def _entry(session: Session) -> tuple[int, int, int, int]:
    """The estimate a read of ``session`` found, as kept: its window's tokens, how far below
    and above them they can lie, and the highest position it holds."""
    c = session.counters
    return (c.tokens, c.pending_below, c.pending_above, session.total_events)


def _slack(session: Session) -> int:
    """How far the window's tokens of ``session`` can be off, both ways together."""
    return session.counters.pending_below + session.counters.pending_above


class ContextEstimates:
    """Estimated tokens per (session, incarnation, version), for versions handed out recently."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, per_session: int = PER_SESSION) -> None:
        self.max_sessions = max_sessions
        self.per_session = per_session
        self._sessions: OrderedDict[str, _Kept] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def _kept(self, session_id: str, incarnation: int) -> _Kept:
        """The session's estimates, most recently used now; another incarnation than the one
        kept replaces it: its versions start again from 1 and say nothing of the old one's."""
        kept = self._sessions.get(session_id)
        if kept is None or kept.incarnation != incarnation:
            kept = self._sessions[session_id] = _Kept(incarnation)
            if len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(session_id)
        return kept

    def note(self, session: Session) -> None:
        """Keep the estimate of the context a read of ``session`` found at its version.

        With its tokens: how far its pending events can be off (0 when its
        count is exact) and the highest position it holds. A read that did not
        see the last landing heard of is dropped (see the module docstring).
        """
        kept = self._kept(session.session_id, session.incarnation)
        entry = _entry(session)
        slack = _slack(session)
        if slack and not kept.saw_last_landing(session.version, slack):
            return
        kept.keep(session.version, entry, self.per_session)

    def estimate(self, session_id: str, version: int) -> KeptEstimate | None:
        """The kept estimate of that version's context; None when not kept."""
        kept = self._sessions.get(session_id)
        entry = None if kept is None else kept.get(version)
        if kept is None or entry is None:
            return None
        return KeptEstimate(kept.incarnation, *entry)

    def counted(self, session: Session, landed: Iterable[tuple[int, int, int, int]]) -> None:
        """This replica landed events' exact counts, leaving ``session``; each ``(position,
        tokens, below, above)`` of ``landed`` says by how much an event's count moved and how
        far below and above its estimate it could lie.

        A kept version older than the session's moves by the events it held
        (a pending event is never archived or cleared: passes plan on exact
        counts, so it is in the window of every version since it came); the
        session's version is kept as the landing left it, unless a read kept
        after the landing saw it already (see the module docstring).
        """
        version = session.version
        kept = self._kept(session.session_id, session.incarnation)
        kept.move(version, list(landed))
        kept.landed_version, kept.landed_slack = version, _slack(session)
        same = kept.slack_at(version)
        if same is None or same > kept.landed_slack:
            kept.keep(version, _entry(session), self.per_session)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
