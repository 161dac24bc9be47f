"""The session engine: per-session serialization, auto-compaction, watchers."""
