"""What each ``serve`` setting means: one table for ``serve --help`` and docs/configuration.md.

``tests/server/test_settings_doc.py`` keeps the table of docs/configuration.md
equal to ``markdown_table()`` and this table equal to ``ServerConfig``'s
fields, so the two never drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Setting:
    """A setting's name (as in ``ServerConfig``), its default as shown, and its meaning."""

    name: str
    default: str
    meaning: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "COMPACTION_" + self.name.upper()


SETTINGS: tuple[Setting, ...] = (
    Setting("listen", "`127.0.0.1:50051`", "HOST:PORT of the API"),
    Setting(
        "health_listen", "off", "HOST:PORT of a second, health-only listener for Kubernetes probes"
    ),
    Setting(
        "metrics_listen",
        "off",
        "HOST:PORT of a plain-HTTP Prometheus endpoint (`/metrics`), see docs/observability.md",
    ),
    Setting(
        "store",
        "`sqlite:///./compaction.db`",
        "`sqlite:///PATH` is relative to the working directory, four slashes make it absolute"
        " (`sqlite:////var/lib/sidecar/x.db`); missing directories are created and the resolved"
        " path is logged at start. Or `postgresql://USER:PASSWORD@HOST:5432/DB` (a libpq URL:"
        " `?sslmode=require`, `?search_path=SCHEMA`, ...)",
    ),
    Setting(
        "default_policy",
        "token_count 8000 → token_budget 4000",
        "the policy of sessions created without one: JSON or YAML, a file holding it, or `none`",
    ),
    Setting(
        "max_event_bytes",
        "1 MiB",
        "the largest event; over it `RESOURCE_EXHAUSTED` naming the limit, nothing stored."
        " Set above `--max-message-bytes`, the server refuses to start (an event arrives in"
        " one message)",
    ),
    Setting(
        "max_message_bytes",
        "16 MiB",
        "the largest request and answer; an answer over it goes out without its events' content"
        " (`content_omitted`), then without its id lists (`*_omitted`), never as an error",
    ),
    Setting("max_events_per_append", "1000", "events one append may carry"),
    Setting(
        "max_tool_calls_per_event",
        "1000",
        "tool calls one event may carry; past it, or past any of the four below,"
        " `RESOURCE_EXHAUSTED` naming the limit, nothing stored. These counts are checked"
        " before anything is built from a request, and on the wire before a request over 64 KiB"
        " is parsed, so one far past them costs next to nothing",
    ),
    Setting("max_tool_results_per_event", "1000", "tool results one event may carry"),
    Setting(
        "max_parts_per_event",
        "1000",
        "non-text parts one event may carry, and reasoning blocks (counted apart)",
    ),
    Setting("max_metadata_entries", "64", "metadata entries one event may carry"),
    Setting(
        "max_items_per_append",
        "4096",
        "tool calls, tool results and parts of all of one append's events together: what"
        " bounds the time one append holds the server's event loop (some tens of ms at the"
        " defaults)",
    ),
    Setting(
        "max_tool_name_chars",
        "256",
        "the longest tool name a tool call or result may carry; past it `INVALID_ARGUMENT`"
        " naming the field, nothing stored",
    ),
    Setting(
        "max_call_id_chars",
        "256",
        "the longest call id a tool call or result may carry; past it `INVALID_ARGUMENT`"
        " naming the field, nothing stored",
    ),
    Setting(
        "max_streams_per_connection",
        "100",
        "open `StreamEvents`/`WatchSession` calls per connection and tenant (two tenants on one"
        " connection, as every client of a Unix socket is, count apart); past it"
        " `RESOURCE_EXHAUSTED`",
    ),
    Setting(
        "max_inflight_mib",
        "256",
        "what appends may hold at once, whole server: the bytes of requests being handled"
        " (streamed and unary) and of stream answers not yet written; past it no more requests"
        " are read until some are answered, connections taking turns by the bytes they were"
        " let in (one larger than it is taken alone)",
    ),
    Setting(
        "auth_token_file",
        "off",
        "bearer tokens, one per line, optionally `TENANT TOKEN` (see docs/security.md); re-read"
        " when it changes, and a removed token ends its open calls",
    ),
    Setting("tls_cert", "off", "PEM certificate chain: serve TLS (with `--tls-key`)"),
    Setting("tls_key", "off", "PEM private key of `--tls-cert`"),
    Setting("tls_client_ca", "off", "PEM CA bundle: require client certificates (mutual TLS)"),
    Setting(
        "model_profiles",
        "built in",
        'a JSON file `{"models": {NAME: {provider, input_window_tokens, max_output_tokens}}}`'
        " whose profiles override and extend the built-in table (see docs/semantics.md,"
        " The session's model); a session may only name a model with a profile",
    ),
    Setting("log_level", "`INFO`", "`DEBUG`, `INFO`, `WARNING`, `ERROR` or `CRITICAL`"),
    Setting(
        "log_format",
        "`text`",
        "`text`, or `json`: one object per line with `session_id`, `compaction_id`, `method`,"
        " `code` as fields",
    ),
    Setting(
        "log_event_content",
        "`false`",
        "log appended events' content at DEBUG; otherwise content is never logged",
    ),
    Setting(
        "summarizer",
        "`auto`",
        "`auto` (Gemini when a Gemini key or Vertex AI is configured, else `extractive`),"
        " `gemini`, `extractive` (offline, no model) or `none`; with `none` a summarizing"
        " policy is refused with `FAILED_PRECONDITION`",
    ),
    Setting(
        "summary_timeout_s",
        "60",
        "the whole summarizer call, retries included (a caller's shorter deadline wins)",
    ),
    Setting(
        "gemini_model",
        "`gemini-2.5-flash`",
        "the summary model; the key comes from `GEMINI_API_KEY` / `GOOGLE_API_KEY`, Vertex AI"
        " from `GOOGLE_GENAI_USE_VERTEXAI`, `GOOGLE_CLOUD_PROJECT`, `GOOGLE_CLOUD_LOCATION`",
    ),
    Setting("gemini_base_url", "the SDK's", "another Gemini endpoint (a proxy, a test server)"),
    Setting("gemini_api_version", "`v1`", "the Gemini API version"),
    Setting("gemini_timeout_s", "30", "one Gemini request"),
    Setting("gemini_max_retries", "3", "retries of a failed Gemini request"),
    Setting(
        "shutdown_grace_s",
        "10",
        "on SIGTERM health goes `NOT_SERVING`, and calls and summaries in flight get this"
        " long, together: the process exits soon after; 0 or more",
    ),
    Setting(
        "sqlite_synchronous",
        "`NORMAL`",
        "`OFF`, `NORMAL`, `FULL` (fsync every commit, see docs/reliability.md, Durability;"
        " every commit then runs on the writer's thread, none on the event loop's) or `EXTRA`",
    ),
    Setting("store_pool_size", "10", "PostgreSQL connections per replica"),
    Setting(
        "store_open_timeout_s",
        "30",
        "at start, how long to wait for an unreachable store before giving up",
    ),
    Setting(
        "store_probe_interval_s",
        "5",
        "how often health re-checks the store (`NOT_SERVING` while it is unreachable)",
    ),
    Setting(
        "read_cache_mib",
        "16",
        "memory the read caches may hold (decoded events; GetContext's wire bytes and last"
        " answers); `0` turns them off. 16 MiB holds about a dozen 200-event windows, plenty"
        " for one pod's agents; a shared service reading many sessions can give it more (Helm"
        " `server.readCacheMiB`; `compaction_read_cache_bytes` shows what they hold). A session"
        " is kept from its second read on; bounded, never stale (see docs/performance.md, What"
        " makes reads fast)",
    ),
    Setting(
        "read_cache_idle_s",
        "30",
        "after this long without calls the read caches are dropped and the freed heap handed"
        " back to the OS; `0` keeps them",
    ),
    Setting(
        "search_timeout_s",
        "5",
        "the longest one `SearchEvents` may take, waiting for a connection included (a caller's"
        " shorter deadline wins); past it the search stops and answers `RESOURCE_EXHAUSTED`"
        " naming `search_timeout_s`",
    ),
    Setting(
        "token_counting",
        "`when_needed`",
        "when an appended event's tokens are counted exactly: `when_needed` estimates each from"
        " its bytes and counts exactly only where a decision needs it (a trigger the bounds"
        " cannot settle, a plan, a usage report; every decision is the one exact counting"
        " makes, and reads say `token_count_estimated` until then), `background` also counts"
        " soon after each append, in batches, `on_append` counts every append before it is"
        " stored (the tokenizer's 26 MiB built on the first). See docs/semantics.md, Token"
        " accounting",
    ),
    Setting(
        "page_token_key",
        "PostgreSQL: from the store URL; SQLite: random per process",
        "a secret of 16 or more characters that signs page tokens (see docs/security.md)."
        " Replicas of one PostgreSQL database share a key derived from its URL unless this is"
        " set. Give it by environment or `--config`, not as a flag, which every local user can"
        " read",
    ),
)


def by_name() -> dict[str, Setting]:
    return {s.name: s for s in SETTINGS}


def markdown_table() -> str:
    """The table of docs/configuration.md."""
    rows = ["| setting | environment | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.flag}` | `{s.env}` | {s.default} | {s.meaning} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"


def help_text(setting: Setting) -> str:
    """One setting's ``serve --help`` line: meaning, default, environment variable."""
    plain = f"{setting.meaning} (default: {setting.default}; env {setting.env})"
    return plain.replace("`", "").replace("%", "%%")
