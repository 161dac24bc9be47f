"""The SQLite schema, as an ordered list of migrations kept in code.

``schema_version`` holds one row per applied migration; the database's version
is the highest. Opening a file runs, in one transaction, every migration above
its version, so a file written by an older build is upgraded in place and a
crash mid-upgrade leaves it at the old version. A file whose version is above
the newest known migration was written by a newer build: opening it fails with
SchemaTooNew instead of writing rows an older schema does not describe.

To change the schema, append a ``Migration(2, ...)`` to ``MIGRATIONS``; never
edit a migration that has shipped.

Layout, and why:

- ``sessions`` has an integer surrogate key ``pk`` so event rows carry a small
  integer, not the client's session id string. The counters the triggers read
  live on the session row and are rewritten in the same transaction as each
  write, so they are always exact.
- ``events`` orders the log by ``(sort_key, position)``: an appended event has
  ``sort_key = 2 * position + 1``; an event a compaction inserts right before
  event X has ``sort_key = 2 * X.position``, which sorts after everything
  appended before X and before X itself, with no renumbering.
- ``events_active`` is a partial index over the non-archived rows, so reading
  the active window costs O(window) however long the archived log grows.
  Queries must spell ``archived = 0`` literally for the planner to use it.
- a cleared event (clear_tool_results) keeps ``content`` and ``token_count``
  as appended and holds the window's version beside them in
  ``cleared_content`` and ``cleared_token_count`` (set by ``cleared_by``):
  window reads take those, listings and search the original.
- ``events_fts`` is an FTS5 table keyed by the event's ``pk`` (its rowid) and
  holding ``format_event(event)``: the text a model would see, tool-call
  arguments and tool results included. It stores its own copy of the text so
  that ``snippet()`` works without re-rendering events.
- ``fts_pending`` holds the ``pk`` of every event not yet in ``events_fts``.
  An append writes its events' rows there, in its own transaction; a
  background write indexes them in batches, and every search indexes all of
  them first, so a search finds everything acknowledged before it began. The
  rows are durable: after a crash the next search or the background write
  indexes what was left.
- an event appended without its exact count (issue 37) holds an estimate in
  ``token_count`` and its bounds in ``token_low`` and ``token_high``
  (``events_pending`` finds them); the session's ``pending_below`` and
  ``pending_above`` say how far its ``tokens`` can be off. Landing the exact
  count rewrites those in a write of its own that bumps no version
  (``sqlite_counts``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.errors import SchemaTooNew
from sidecar.store.tool_links import links_of_content

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for another process's lock before "database is locked"."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: its version number, what it does, and its statements.

    ``then`` runs after the statements, in the same transaction, for rows SQL
    cannot compute (a store awaits it when it returns an awaitable).
    """

    version: int
    description: str
    statements: tuple[str, ...]
    then: Callable[[Any], Any] | None = None


_MIGRATION_1 = Migration(
    1,
    "sessions, events, compactions and full-text search",
    (
        """
        CREATE TABLE sessions (
            pk INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            version INTEGER NOT NULL,
            policy_json TEXT,
            labels TEXT NOT NULL DEFAULT '{}',
            create_time INTEGER NOT NULL,
            update_time INTEGER NOT NULL,
            active_events INTEGER NOT NULL DEFAULT 0,
            real_events INTEGER NOT NULL DEFAULT 0,
            turns INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            system_tokens INTEGER NOT NULL DEFAULT 0,
            turns_since_compaction INTEGER NOT NULL DEFAULT 0,
            total_events INTEGER NOT NULL DEFAULT 0,
            last_compaction_id TEXT NOT NULL DEFAULT ''
        )
        """,
        """
        CREATE TABLE events (
            pk INTEGER PRIMARY KEY,
            session INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            sort_key INTEGER NOT NULL,
            id TEXT NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            synthetic INTEGER NOT NULL DEFAULT 0,
            archived INTEGER NOT NULL DEFAULT 0,
            archived_by TEXT,
            written_by TEXT,
            create_time INTEGER NOT NULL,
            UNIQUE (session, position),
            UNIQUE (session, id)
        )
        """,
        "CREATE INDEX events_log_order ON events (session, sort_key, position)",
        """
        CREATE INDEX events_active ON events (session, sort_key, position)
        WHERE archived = 0
        """,
        """
        CREATE TABLE compactions (
            pk INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            session INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
            version_before INTEGER NOT NULL,
            version_after INTEGER NOT NULL,
            strategy TEXT NOT NULL,
            archived_ids TEXT NOT NULL,
            inserted_ids TEXT NOT NULL,
            tokens_saved INTEGER NOT NULL,
            summarizer_latency_ms REAL NOT NULL,
            summary_input_tokens INTEGER NOT NULL,
            summary_output_tokens INTEGER NOT NULL,
            create_time INTEGER NOT NULL
        )
        """,
        "CREATE INDEX compactions_by_session ON compactions (session, pk)",
        """
        CREATE VIRTUAL TABLE events_fts USING fts5(
            body, tokenize = 'unicode61 remove_diacritics 2'
        )
        """,
    ),
)

_MIGRATION_2 = Migration(
    2,
    "a heartbeat row, rewritten by the health probe to prove the file takes writes",
    ("CREATE TABLE heartbeat (id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL)",),
)

_MIGRATION_3 = Migration(
    3,
    "cleared tool results: the window's placeholder beside the original content",
    (
        # The cleared event as the window shows it (codec JSON) and its token
        # count; NULL while not cleared. ``content`` and the full-text row keep
        # the original, so ListEvents and search see what was appended.
        "ALTER TABLE events ADD COLUMN cleared_content TEXT",
        "ALTER TABLE events ADD COLUMN cleared_token_count INTEGER",
        "ALTER TABLE events ADD COLUMN cleared_by TEXT",
        "ALTER TABLE compactions ADD COLUMN cleared_ids TEXT NOT NULL DEFAULT '[]'",
    ),
)

_MIGRATION_4 = Migration(
    4,
    "the session's model and its token calibration",
    (
        "ALTER TABLE sessions ADD COLUMN model TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN calibration_factor REAL NOT NULL DEFAULT 1.0",
        "ALTER TABLE sessions ADD COLUMN calibration_samples INTEGER NOT NULL DEFAULT 0",
    ),
)

_MIGRATION_5 = Migration(
    5,
    "the compaction history: what set each pass off, restores, and the counts a restore needs",
    (
        "ALTER TABLE compactions ADD COLUMN cause TEXT NOT NULL DEFAULT ''",
        # The restore that undid this compaction; NULL while it stands.
        "ALTER TABLE compactions ADD COLUMN restored_by TEXT",
        # For a restore: the compaction it undid, and the events it brought back.
        "ALTER TABLE compactions ADD COLUMN restores TEXT",
        "ALTER TABLE compactions ADD COLUMN restored_ids TEXT NOT NULL DEFAULT '[]'",
        # turns_since_compaction right before and right after the pass.
        "ALTER TABLE compactions ADD COLUMN turns_before INTEGER",
        "ALTER TABLE compactions ADD COLUMN turns_after INTEGER",
        "ALTER TABLE sessions ADD COLUMN auto_compaction_paused INTEGER NOT NULL DEFAULT 0",
    ),
)

_MIGRATION_6 = Migration(
    6,
    "the window's stable prefix: what the last compaction left, which appends only extend",
    (
        "ALTER TABLE sessions ADD COLUMN stable_prefix_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN stable_prefix_events INTEGER NOT NULL DEFAULT 0",
    ),
)

_MIGRATION_7 = Migration(
    7,
    "events waiting to be indexed for search, indexed in batches off the appends' transactions",
    ("CREATE TABLE fts_pending (pk INTEGER PRIMARY KEY)",),
)

_MIGRATION_8 = Migration(
    8,
    "the marks a restore follows, indexed: what each compaction archived, cleared and wrote",
    (
        # Partial: most events carry no mark, and ``archived_by = ?`` implies
        # ``archived_by IS NOT NULL``, so the planner takes these for a restore's
        # lookups and its updates touch only the rows the undone pass marked.
        "CREATE INDEX events_archived_by ON events (session, archived_by)"
        " WHERE archived_by IS NOT NULL",
        "CREATE INDEX events_cleared_by ON events (session, cleared_by)"
        " WHERE cleared_by IS NOT NULL",
        "CREATE INDEX events_written_by ON events (session, written_by)"
        " WHERE written_by IS NOT NULL",
    ),
)

_MIGRATION_9 = Migration(
    9,
    "each compaction's loss report: the identifiers of what it archived or cleared it dropped",
    (
        "ALTER TABLE compactions ADD COLUMN identifiers_dropped INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE compactions ADD COLUMN dropped_identifiers TEXT NOT NULL DEFAULT '[]'",
    ),
)


def _link_existing_events(db: sqlite3.Connection) -> None:
    """``tool_links`` rows for the events stored before the table was."""
    rows = db.execute(
        "SELECT session, id, content FROM events"
        """ WHERE content LIKE '%"c":[%' OR content LIKE '%"r":[%'"""
    )
    db.executemany(
        "INSERT INTO tool_links (session, event, kind, call_key) VALUES (?, ?, ?, ?)",
        (
            (session, event, kind, key)
            for session, event, content in rows
            for kind, key in links_of_content(content)
        ),
    )


_MIGRATION_10 = Migration(
    10,
    "tool links: each event's tool calls and results by call id, so a pass plans on the head",
    (
        """
        CREATE TABLE tool_links (
            session INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
            event TEXT NOT NULL,
            kind INTEGER NOT NULL,
            call_key INTEGER NOT NULL
        )
        """,
        "CREATE INDEX tool_links_by_call ON tool_links (session, kind, call_key)",
        # The system messages and summaries every pass partitions off: few, anywhere.
        "CREATE INDEX events_pinned ON events (session, sort_key, position)"
        " WHERE archived = 0 AND (role = 'system' OR synthetic = 1)",
    ),
    _link_existing_events,
)

_MIGRATION_11 = Migration(
    11,
    "exact counts left for later: a pending event's bounds, and how far the counters may be off",
    (
        # Set while the event's exact count is pending (issue 37): ``token_count`` then
        # holds an estimate between them. NULL once counted, as every older row is.
        "ALTER TABLE events ADD COLUMN token_low INTEGER",
        "ALTER TABLE events ADD COLUMN token_high INTEGER",
        # How far below and above ``tokens`` the window's exact count can lie.
        "ALTER TABLE sessions ADD COLUMN pending_below INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN pending_above INTEGER NOT NULL DEFAULT 0",
        # Partial: only the few rows still waiting for their count.
        "CREATE INDEX events_pending ON events (session, position) WHERE token_low IS NOT NULL",
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    _MIGRATION_1,
    _MIGRATION_2,
    _MIGRATION_3,
    _MIGRATION_4,
    _MIGRATION_5,
    _MIGRATION_6,
    _MIGRATION_7,
    _MIGRATION_8,
    _MIGRATION_9,
    _MIGRATION_10,
    _MIGRATION_11,
)
"""Every migration, in order; versions are 1, 2, 3, ... with no gap."""

_VERSION_TABLE = """
    CREATE TABLE IF NOT EXISTS schema_version (
        version INTEGER PRIMARY KEY,
        description TEXT NOT NULL,
        applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )
"""


def latest_version(migrations: Sequence[Migration] | None = None) -> int:
    migrations = MIGRATIONS if migrations is None else migrations
    return migrations[-1].version if migrations else 0


def current_version(db: sqlite3.Connection) -> int:
    """The file's schema version; 0 for a file this service never migrated."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = db.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(row[0])


def migrate(
    db: sqlite3.Connection, path: str, migrations: Sequence[Migration] | None = None
) -> int:
    """Bring the file at ``path`` up to the newest migration; return the version it ends at.

    ``db`` must be in autocommit mode (``isolation_level=None``): the upgrade is
    one explicit IMMEDIATE transaction, so two processes opening the same old
    file cannot both run it. ``migrations`` defaults to MIGRATIONS, looked up
    at call time.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise RuntimeError(f"migration versions must be 1, 2, ...; got {migration.version}")
    latest = latest_version(migrations)
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(_VERSION_TABLE)
        found = current_version(db)
        if found > latest:
            raise SchemaTooNew(
                f"database {path!r} has schema version {found}, but this build knows"
                f" versions up to {latest}: it was written by a newer release."
                " Upgrade the service, or point it at another file."
            )
        for migration in migrations[found:]:
            for statement in migration.statements:
                db.execute(statement)
            if migration.then is not None:
                migration.then(db)
            db.execute(
                "INSERT INTO schema_version (version, description) VALUES (?, ?)",
                (migration.version, migration.description),
            )
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return latest


SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


def configure_writer(db: sqlite3.Connection, synchronous: str) -> str:
    """Pragmas of the one writing connection (see the durability note in sqlite.py); the
    journal mode it got, ``wal`` unless the file cannot have one."""
    if synchronous not in SYNCHRONOUS_MODES:  # it is spliced into the PRAGMA
        raise ValueError(f"bad synchronous setting {synchronous!r}")
    _configure_common(db)
    (mode,) = db.execute("PRAGMA journal_mode = WAL").fetchone()
    db.execute(f"PRAGMA synchronous = {synchronous}")
    # Checkpoints run on a connection of their own (``sqlite_checkpoints``),
    # never inside one of the writer's commits.
    db.execute("PRAGMA wal_autocheckpoint = 0")
    return str(mode).lower()


def configure_reader(db: sqlite3.Connection) -> None:
    """Pragmas of a reading connection; ``query_only`` makes a stray write fail loudly."""
    _configure_common(db)
    db.execute("PRAGMA query_only = ON")


def _configure_common(db: sqlite3.Connection) -> None:
    # Wait for another process's lock (a backup, a second replica opening the
    # file) instead of failing at once with "database is locked".
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
