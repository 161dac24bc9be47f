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
"""

from __future__ import annotations

from collections import OrderedDict

MAX_SESSIONS = 4096
PER_SESSION = 8


class ContextEstimates:
    """Estimated tokens per (session, incarnation, version), for versions handed out recently."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, per_session: int = PER_SESSION) -> None:
        self.max_sessions = max_sessions
        self.per_session = per_session
        # Per session id: its incarnation, and that incarnation's versions' estimates.
        self._sessions: OrderedDict[str, tuple[int, dict[int, int]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def note(self, session_id: str, incarnation: int, version: int, tokens: int) -> None:
        """Keep that the context of ``version`` was estimated at ``tokens``.

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
        versions[version] = tokens
        if len(versions) > self.per_session:
            del versions[min(versions)]

    def estimate(self, session_id: str, version: int) -> tuple[int, int] | None:
        """The incarnation kept and its estimate of that version's context, if still kept."""
        kept = self._sessions.get(session_id)
        if kept is None or version not in kept[1]:
            return None
        return kept[0], kept[1][version]

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
