"""What we estimated each recent context at: the denominator of a usage report.

An agent reads the context of version v, calls its model, and appends the
model's answer with the prompt tokens the provider reported for that call
(``ModelUsage``). The report is worth something only against our estimate
of that same context, so the estimate of every version this replica handed
out (GetContext) or produced (an append's acknowledgement) is kept here for a
while: the last ``PER_SESSION`` versions of each of the last ``MAX_SESSIONS``
sessions, least recently used out first. Bounded in bytes by those counts
(an entry is two integers; a session's dict a few hundred bytes), so about
2 MB at most.

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
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

MAX_SESSIONS = 4096
PER_SESSION = 8

_TOKENS, _BELOW, _ABOVE, _THROUGH = range(4)


class ContextEstimates:
    """Estimated tokens per (session, incarnation, version), for versions handed out recently."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, per_session: int = PER_SESSION) -> None:
        self.max_sessions = max_sessions
        self.per_session = per_session
        # Per session id: its incarnation, and that incarnation's versions' estimates, each
        # [tokens, pending below, pending above, the positions it holds].
        self._sessions: OrderedDict[str, tuple[int, dict[int, list[int]]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def note(
        self,
        session_id: str,
        incarnation: int,
        version: int,
        tokens: int,
        *,
        below: int = 0,
        above: int = 0,
        through: int = 0,
    ) -> None:
        """Keep that the context of ``version`` was estimated at ``tokens``.

        ``below`` and ``above``: how far its pending events can be off (0 when
        its count is exact); ``through``: the highest position it holds.
        Another incarnation than the one kept replaces it: its versions start
        again from 1 and say nothing of the old one's.
        """
        kept = self._sessions.get(session_id)
        if kept is None or kept[0] != incarnation:
            kept = self._sessions[session_id] = (incarnation, {})
            if len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        self._sessions.move_to_end(session_id)
        versions = kept[1]
        versions[version] = [tokens, below, above, through]
        if len(versions) > self.per_session:
            del versions[min(versions)]

    def estimate(self, session_id: str, version: int) -> tuple[int, int, bool] | None:
        """The incarnation kept, its estimate of that version's context, and whether that
        estimate is the exact count; None when not kept."""
        kept = self._sessions.get(session_id)
        if kept is None or version not in kept[1]:
            return None
        entry = kept[1][version]
        return kept[0], entry[_TOKENS], entry[_BELOW] == 0 and entry[_ABOVE] == 0

    def counted(
        self, session_id: str, incarnation: int, landed: Iterable[tuple[int, int, int, int]]
    ) -> None:
        """Events' exact counts landed: each ``(position, tokens, below, above)`` says by how
        much its count moved and how far below and above its estimate it could lie.

        Every kept version of that incarnation which held the position moves
        by it (a pending event is never archived or cleared: passes plan on
        exact counts, so it is in the window of every version since it came).
        """
        kept = self._sessions.get(session_id)
        if kept is None or kept[0] != incarnation:
            return
        for position, tokens, below, above in landed:
            for entry in kept[1].values():
                if entry[_THROUGH] >= position and (entry[_BELOW] or entry[_ABOVE]):
                    entry[_TOKENS] += tokens
                    entry[_BELOW] -= below
                    entry[_ABOVE] -= above

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
