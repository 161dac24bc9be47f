"""Logging setup: human-readable lines, or one JSON object per line for log pipelines.

With ``--log-format json`` each record is one line such as::

    {"time": "2026-11-30T02:00:01.448Z", "level": "INFO", "logger": "sidecar.engine.engine",
     "message": "compacted", "session_id": "s1", "compaction_id": "9f3c...", "strategy": ...}

Fields passed with ``extra=`` (``session_id``, ``compaction_id``, ``method``,
``code``...) become keys of their own, so a pipeline can filter on them
without parsing messages. Event content is never logged, except by
``--log-event-content`` (for debugging, at DEBUG level).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO

from pythonjsonlogger.json import JsonFormatter

FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class _UtcJsonFormatter(JsonFormatter):
    """JSON lines with an RFC 3339 UTC time, ``level`` and ``logger`` keys."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z"


def configure_logging(level: str, fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Replace the root logger's handlers with one that writes ``fmt`` to ``stream``."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, got {fmt!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(
            _UtcJsonFormatter(
                "{asctime}{levelname}{name}{message}",
                style="{",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter(_TEXT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
