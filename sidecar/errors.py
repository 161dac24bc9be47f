"""The domain's errors. Each maps to one gRPC status code, in one place (the server)."""

from __future__ import annotations


class SidecarError(Exception):
    """Base of every error the service raises on purpose."""


class SessionNotFound(SidecarError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found")
        self.session_id = session_id


class SessionExists(SidecarError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} already exists")
        self.session_id = session_id


class VersionConflict(SidecarError):
    """The session changed since the caller (or a compaction plan) last saw it."""

    def __init__(self, message: str, *, current_version: int) -> None:
        super().__init__(message)
        self.current_version = current_version


class CompactionNotFound(SidecarError):
    """No compaction of that id in the session's history."""

    def __init__(self, session_id: str, compaction_id: str) -> None:
        super().__init__(f"compaction {compaction_id!r} not found in session {session_id!r}")
        self.compaction_id = compaction_id


class RestoreRefused(SidecarError):
    """A restore that cannot be made: not the newest compaction standing, or nothing to undo.

    ``first`` names the compaction to restore first, when there is one.
    """

    def __init__(self, message: str, *, first: str = "") -> None:
        super().__init__(message)
        self.first = first


class InvalidArgument(SidecarError):
    """Bad input; ``field`` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.description = message


class InvalidConfig(InvalidArgument):
    """A compaction policy, trigger or strategy value out of range."""


class EventConflict(SidecarError):
    """An event id already stored in the session with a different payload."""

    def __init__(self, session_id: str, event_id: str) -> None:
        super().__init__(
            f"event {event_id!r} already exists in session {session_id!r} with a different payload"
        )
        self.session_id = session_id
        self.event_id = event_id


class LimitExceeded(SidecarError):
    """A request over a configured size limit; ``limit`` names it."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(f"{limit}: {message}")
        self.limit = limit


class NoSummarizer(SidecarError):
    """A summarizing policy on a server started without a summarizer (--summarizer)."""

    def __init__(self, field: str) -> None:
        super().__init__(
            f"{field}: this server has no summarizer configured; start it with"
            " --summarizer gemini (or extractive), or choose a window strategy"
        )
        self.field = field


class SummarizerUnavailable(SidecarError):
    """The summarizer could not produce a summary (network, quota, 5xx)."""


class SummarizerTimeout(SidecarError):
    """The summarizer did not answer within the deadline."""


class StoreUnavailable(SidecarError):
    """The store cannot be reached or refused the operation for a transient reason."""


class SchemaTooNew(SidecarError):
    """The database was written by a newer version of the service."""
