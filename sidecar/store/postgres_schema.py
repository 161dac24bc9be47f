"""The PostgreSQL schema, as an ordered list of migrations kept in code.

The same layout as the SQLite schema (see ``sqlite_schema``), in PostgreSQL's
own types, and the same rules: ``schema_version`` holds one row per applied
migration; a database above the newest known version was written by a newer
release and is refused with SchemaTooNew; to change the schema, append a
migration, never edit one that has shipped.

Several replicas may start at once against one database. Migration runs in one
transaction holding a transaction-scoped advisory lock keyed by the schema
name, so exactly one replica migrates and the others wait, then find nothing
left to do. Tables live in the first schema of the connection's
``search_path`` (``?search_path=...`` in the store URL), so one database can
hold several independent stores.

What differs from SQLite, and why:

- full-text search is a ``tsvector`` column generated from ``body`` (the
  formatted event text: tool-call arguments and tool results included) with
  a GIN index. Its configuration, ``compaction_search``, is ``simple`` (no
  stemming, no stop words, like SQLite's ``unicode61`` tokenizer) with the
  ``unaccent`` dictionary in front, so that, as on SQLite, "cafe" finds
  "Café": a query finds the same events on both stores. Only the first
  256 KiB of an event's text are indexed: a tsvector is capped at 1 MB, and
  a bigger event must still store.
- labels are ``jsonb`` with a GIN index, so a label filter is an indexed
  containment query (``labels @> '{"team": "sre"}'``) instead of a scan.
- event content stays ``text`` holding the codec's compact JSON, not
  ``jsonb``: jsonb cannot hold U+0000, which a model's output may contain.
- times are ``timestamptz``: readable in ``psql``, microsecond precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import asyncpg

from sidecar.errors import InvalidConfig, SchemaTooNew
from sidecar.store.sqlite_schema import Migration
from sidecar.store.tool_links import links_of_content

INDEXED_TEXT_CHARS = 262_144

WORD_SEPARATORS = "".join(chr(c) for c in range(33, 127) if not chr(c).isalnum())
"""ASCII punctuation, read as spaces before PostgreSQL's parser sees text or a query.

SQLite's ``unicode61`` tokenizer splits at every character that is not a
letter, mark or digit; PostgreSQL's default parser keeps ``/etc/passwd``,
``https://example.com/docs``, ``ops@example.com`` and ``1.2.3`` as single
lexemes, so a search for ``passwd`` or ``example`` found them on SQLite only.
"""


def _sql_text(text: str) -> str:
    """``text`` as an SQL string literal (standard_conforming_strings: only quotes double)."""
    return "'" + text.replace("'", "''") + "'"


def searchable_text(sql: str) -> str:
    """The SQL expression ``sql`` with its ASCII punctuation read as spaces."""
    return (
        f"translate({sql}, {_sql_text(WORD_SEPARATORS)}, {_sql_text(' ' * len(WORD_SEPARATORS))})"
    )


Db: TypeAlias = (
    "asyncpg.Connection[asyncpg.Record] | asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"
)
"""A connection, or the pool's proxy for one: every query function takes either."""

_MIGRATION_1 = Migration(
    1,
    "sessions, events, compactions and full-text search",
    (
        """
        CREATE TABLE sessions (
            pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            version bigint NOT NULL,
            policy_json text,
            labels jsonb NOT NULL DEFAULT '{}',
            create_time timestamptz NOT NULL,
            update_time timestamptz NOT NULL,
            active_events integer NOT NULL DEFAULT 0,
            real_events integer NOT NULL DEFAULT 0,
            turns integer NOT NULL DEFAULT 0,
            tokens bigint NOT NULL DEFAULT 0,
            system_tokens bigint NOT NULL DEFAULT 0,
            turns_since_compaction integer NOT NULL DEFAULT 0,
            total_events bigint NOT NULL DEFAULT 0,
            last_compaction_id text NOT NULL DEFAULT ''
        )
        """,
        "CREATE INDEX sessions_labels ON sessions USING gin (labels jsonb_path_ops)",
        f"""
        CREATE TABLE events (
            pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session bigint NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
            position bigint NOT NULL,
            sort_key bigint NOT NULL,
            id text NOT NULL,
            role text NOT NULL,
            content text NOT NULL,
            token_count integer NOT NULL,
            synthetic boolean NOT NULL DEFAULT false,
            archived boolean NOT NULL DEFAULT false,
            archived_by text,
            written_by text,
            create_time timestamptz NOT NULL,
            body text NOT NULL,
            search tsvector GENERATED ALWAYS AS
                (to_tsvector('simple'::regconfig, left(body, {INDEXED_TEXT_CHARS}))) STORED,
            UNIQUE (session, position),
            UNIQUE (session, id)
        )
        """,
        "CREATE INDEX events_log_order ON events (session, sort_key, position)",
        """
        CREATE INDEX events_active ON events (session, sort_key, position)
        WHERE NOT archived
        """,
        "CREATE INDEX events_search ON events USING gin (search)",
        """
        CREATE TABLE compactions (
            pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL UNIQUE,
            session bigint NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
            version_before bigint NOT NULL,
            version_after bigint NOT NULL,
            strategy text NOT NULL,
            archived_ids text[] NOT NULL,
            inserted_ids text[] NOT NULL,
            tokens_saved integer NOT NULL,
            summarizer_latency_ms double precision NOT NULL,
            summary_input_tokens integer NOT NULL,
            summary_output_tokens integer NOT NULL,
            create_time timestamptz NOT NULL
        )
        """,
        "CREATE INDEX compactions_by_session ON compactions (session, pk)",
    ),
)

_MIGRATION_2 = Migration(
    2,
    "a heartbeat row, rewritten by the health probe to prove the database takes writes",
    (
        """
        CREATE TABLE heartbeat (
            id integer PRIMARY KEY CHECK (id = 1),
            at timestamptz NOT NULL
        )
        """,
    ),
)

SEARCH_CONFIG = "compaction_search"
"""The text search configuration of the ``search`` column and of every query."""

_MIGRATION_3 = Migration(
    3,
    "search folds accents, as SQLite's remove_diacritics does",
    (
        # The unaccent dictionary ships with PostgreSQL (contrib) and is a trusted
        # extension: a database owner may create it. One instance per database,
        # in whichever schema got it first, hence the qualified name. (Taking a lock
        # of the database first changes nothing a migration already made.) Where it
        # cannot be had, search still works, without folding accents (the store
        # warns at open; see ``folds_accents``).
        f"""
        DO $migration$
        DECLARE
            home text;
        BEGIN
            CREATE TEXT SEARCH CONFIGURATION {SEARCH_CONFIG} (COPY = pg_catalog.simple);
            -- The extension is the database's, the migration lock only the schema's: a
            -- second schema migrating at once would meet the first one's uncommitted
            -- extension, fail on its name and go on without folding, for good.
            PERFORM pg_advisory_xact_lock(hashtextextended('compaction-sidecar:unaccent', 0));
            BEGIN
                CREATE EXTENSION IF NOT EXISTS unaccent;
            EXCEPTION WHEN OTHERS THEN
                RAISE WARNING 'unaccent is not available (%): search will not fold accents',
                    SQLERRM;
                RETURN;
            END;
            SELECT quote_ident(n.nspname) INTO home
                FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
                WHERE x.extname = 'unaccent';
            EXECUTE format(
                'ALTER TEXT SEARCH CONFIGURATION {SEARCH_CONFIG}'
                ' ALTER MAPPING FOR hword, hword_part, word WITH %s.unaccent, pg_catalog.simple',
                home
            );
        END
        $migration$
        """,
        "DROP INDEX events_search",
        "ALTER TABLE events DROP COLUMN search",
        f"""
        ALTER TABLE events ADD COLUMN search tsvector GENERATED ALWAYS AS
            (to_tsvector('{SEARCH_CONFIG}'::regconfig, left(body, {INDEXED_TEXT_CHARS}))) STORED
        """,
        "CREATE INDEX events_search ON events USING gin (search)",
    ),
)

_MIGRATION_4 = Migration(
    4,
    "cleared tool results: the window's placeholder beside the original content",
    (
        # As on SQLite: the cleared event as the window shows it and its token
        # count, NULL while not cleared; ``content`` and ``body`` (search) keep
        # the original.
        "ALTER TABLE events ADD COLUMN cleared_content text",
        "ALTER TABLE events ADD COLUMN cleared_token_count integer",
        "ALTER TABLE events ADD COLUMN cleared_by text",
        "ALTER TABLE compactions ADD COLUMN cleared_ids text[] NOT NULL DEFAULT '{}'",
    ),
)

_MIGRATION_5 = Migration(
    5,
    "the session's model and its token calibration",
    (
        "ALTER TABLE sessions ADD COLUMN model text NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN calibration_factor double precision NOT NULL DEFAULT 1",
        "ALTER TABLE sessions ADD COLUMN calibration_samples bigint NOT NULL DEFAULT 0",
    ),
)

_MIGRATION_6 = Migration(
    6,
    "the compaction history: what set each pass off, restores, and the counts a restore needs",
    (
        "ALTER TABLE compactions ADD COLUMN cause text NOT NULL DEFAULT ''",
        "ALTER TABLE compactions ADD COLUMN restored_by text",
        "ALTER TABLE compactions ADD COLUMN restores text",
        "ALTER TABLE compactions ADD COLUMN restored_ids text[] NOT NULL DEFAULT '{}'",
        "ALTER TABLE compactions ADD COLUMN turns_before integer",
        "ALTER TABLE compactions ADD COLUMN turns_after integer",
        "ALTER TABLE sessions ADD COLUMN auto_compaction_paused boolean NOT NULL DEFAULT false",
    ),
)

_MIGRATION_7 = Migration(
    7,
    "the window's stable prefix: what the last compaction left, which appends only extend",
    (
        "ALTER TABLE sessions ADD COLUMN stable_prefix_tokens integer NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN stable_prefix_events integer NOT NULL DEFAULT 0",
    ),
)

_MIGRATION_8 = Migration(
    8,
    "the marks a restore follows, indexed: what each compaction archived, cleared and wrote",
    (
        # As on SQLite: partial, and ``archived_by = $1`` implies the predicate, so a
        # restore's lookups and updates touch only the rows the undone pass marked.
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
        "ALTER TABLE compactions ADD COLUMN identifiers_dropped integer NOT NULL DEFAULT 0",
        "ALTER TABLE compactions ADD COLUMN dropped_identifiers text[] NOT NULL DEFAULT '{}'",
    ),
)


async def _link_existing_events(db: Db) -> None:
    """``tool_links`` rows for the events stored before the table was."""
    rows = await db.fetch(
        "SELECT session, id, content FROM events"
        """ WHERE content LIKE '%"c":[%' OR content LIKE '%"r":[%'"""
    )
    links = [(row[0], row[1], kind, key) for row in rows for kind, key in links_of_content(row[2])]
    if links:
        await db.executemany(
            "INSERT INTO tool_links (session, event, kind, call_key) VALUES ($1, $2, $3, $4)",
            links,
        )


_MIGRATION_10 = Migration(
    10,
    "tool links: each event's tool calls and results by call id, so a pass plans on the head",
    (
        """
        CREATE TABLE tool_links (
            session bigint NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
            event text NOT NULL,
            kind smallint NOT NULL,
            call_key bigint NOT NULL
        )
        """,
        "CREATE INDEX tool_links_by_call ON tool_links (session, kind, call_key)",
        # The system messages and summaries every pass partitions off: few, anywhere.
        "CREATE INDEX events_pinned ON events (session, sort_key, position)"
        " WHERE NOT archived AND (role = 'system' OR synthetic)",
    ),
    _link_existing_events,
)

_MIGRATION_11 = Migration(
    11,
    "exact counts left for later: a pending event's bounds, and how far the counters may be off",
    (
        # As on SQLite: set while the event's exact count is pending, NULL once counted.
        "ALTER TABLE events ADD COLUMN token_low integer",
        "ALTER TABLE events ADD COLUMN token_high integer",
        "ALTER TABLE sessions ADD COLUMN pending_below bigint NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN pending_above bigint NOT NULL DEFAULT 0",
        "CREATE INDEX events_pending ON events (session, position) WHERE token_low IS NOT NULL",
    ),
)

_MIGRATION_12 = Migration(
    12,
    "search splits words at punctuation, as SQLite's unicode61 tokenizer does",
    (
        "DROP INDEX events_search",
        "ALTER TABLE events DROP COLUMN search",
        f"""
        ALTER TABLE events ADD COLUMN search tsvector GENERATED ALWAYS AS
            (to_tsvector('{SEARCH_CONFIG}'::regconfig,
                         {searchable_text(f"left(body, {INDEXED_TEXT_CHARS})")})) STORED
        """,
        "CREATE INDEX events_search ON events USING gin (search)",
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
    _MIGRATION_12,
)
"""Every migration, in order; versions are 1, 2, 3, ... with no gap."""

_VERSION_TABLE = """
    CREATE TABLE IF NOT EXISTS schema_version (
        version integer PRIMARY KEY,
        description text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
    )
"""


async def migrate(db: Db, where: str, migrations: Sequence[Migration] | None = None) -> int:
    """Bring the connection's schema up to the newest migration; return the version it ends at.

    ``where`` names the database in errors. Safe to call from several
    processes at once (see the module docstring). A ``search_path`` none of
    whose schemas exists is InvalidConfig naming ``store``: the schema is not
    created, so that a misspelt one cannot start an empty store beside the
    real one, and a role needs no right to create schemas.
    """
    if await db.fetchval("SELECT current_schema()") is None:
        search_path = await db.fetchval("SHOW search_path")
        raise InvalidConfig(
            "store",
            f"postgres {where}: no schema of search_path {search_path!r} exists;"
            " create the store's schema first (CREATE SCHEMA name) or correct ?search_path",
        )
    migrations = MIGRATIONS if migrations is None else migrations
    for expected, migration in enumerate(migrations, start=1):
        if migration.version != expected:
            raise RuntimeError(f"migration versions must be 1, 2, ...; got {migration.version}")
    latest = migrations[-1].version if migrations else 0
    async with db.transaction():
        # Keyed by schema, so stores in different schemas of one database do not wait
        # on each other; released at commit or rollback.
        await db.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('compaction-sidecar:'"
            " || current_schema(), 0))"
        )
        await db.execute(_VERSION_TABLE)
        found = await db.fetchval("SELECT coalesce(max(version), 0) FROM schema_version")
        if found > latest:
            raise SchemaTooNew(
                f"database {where} has schema version {found}, but this build knows"
                f" versions up to {latest}: it was written by a newer release."
                " Upgrade the service, or point it at another database or schema."
            )
        for migration in migrations[found:]:
            for statement in migration.statements:
                await db.execute(statement)
            if migration.then is not None:
                await migration.then(db)
            await db.execute(
                "INSERT INTO schema_version (version, description) VALUES ($1, $2)",
                migration.version,
                migration.description,
            )
    return latest


async def folds_accents(db: Db) -> bool:
    """Whether this schema's search configuration has the unaccent dictionary in front."""
    found = await db.fetchval(
        "SELECT count(*) FROM pg_ts_config_map m JOIN pg_ts_dict d ON d.oid = m.mapdict"
        f" WHERE m.mapcfg = '{SEARCH_CONFIG}'::regconfig AND d.dictname = 'unaccent'"
    )
    return bool(found)
