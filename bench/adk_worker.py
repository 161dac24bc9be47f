"""Google ADK's session services, driven in process: the baseline for the ADK benchmarks.

Why a separate process: no google-adk release accepts our pinned google-genai
(google-adk 2.13.0, the newest, needs ``google-genai>=2.30,<3``; we pin 3.3.0),
so ADK lives in its own virtualenv (``make bench-adk-venv``) and this worker runs
there, with only the standard library, ``bench.texts``, ``bench.json_lines`` and
google-adk imported.
The sidecar benchmarks in the parent process talk to it over stdin/stdout, one
JSON object per line, and alternate rounds with it in the same run. Everything
ADK does is timed here, in ADK's own process, so no hop or pipe is counted
against it.

Commands (``{"op": ...}``) and replies:

- ``open``: ``service`` (``sqlite`` = ``SqliteSessionService(path)``, ``database`` =
  ``DatabaseSessionService("sqlite+aiosqlite:///path")``), ``name``, ``path``,
  ``wal`` (put the file in WAL mode first, like the sidecar's) -> ``{}``
- ``append``: ``name``, ``session``, ``start``, ``count`` -> ``{"seconds": s}``:
  create the session (first time only), then ``append_event`` events
  ``start..start+count-1`` one after another.
- ``get``: ``name``, ``session``, ``calls``, ``recent`` (``null``: ADK's default,
  every event) -> ``{"seconds": [...], "events": n}``: ``get_session`` latencies.
- ``quit``.

Run by hand: ``/path/to/adk-venv/bin/python -m bench.adk_worker`` from the repo root.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

# google-adk lives only in ADK's virtualenv and ships no type information.
from google.adk.events import Event  # type: ignore[import-not-found, import-untyped, unused-ignore]
from google.adk.sessions import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    BaseSessionService,
    Session,
)
from google.adk.sessions.base_session_service import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    GetSessionConfig,
)
from google.adk.sessions.database_session_service import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    DatabaseSessionService,
)
from google.adk.sessions.sqlite_session_service import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    SqliteSessionService,
)
from google.genai import types

from bench.json_lines import serve
from bench.texts import is_user, text_of

APP = "bench"
USER = "bench-user"


def adk_event(i: int) -> Event:
    """The ``i``-th benchmark event as ADK stores it: one text part, user or model."""
    user = is_user(i)
    return Event(
        invocation_id=f"inv-{i // 2}",
        author="user" if user else "agent",
        content=types.Content(
            role="user" if user else "model", parts=[types.Part(text=text_of(i))]
        ),
    )


def _set_wal(path: str) -> None:
    """WAL is a property of the file (it persists), so ADK's own connections use it too."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode = WAL")


class Worker:
    """Holds the opened services by name and answers one command at a time."""

    def __init__(self) -> None:
        self.services: dict[str, BaseSessionService] = {}
        # The Session objects appended to, as an agent keeps them between turns.
        self.sessions: dict[tuple[str, str], Session] = {}

    async def open(self, service: str, name: str, path: str, wal: bool) -> dict[str, Any]:
        if wal:
            _set_wal(path)
        if service == "sqlite":
            self.services[name] = SqliteSessionService(path)
        elif service == "database":
            self.services[name] = DatabaseSessionService(f"sqlite+aiosqlite:///{path}")
        else:
            raise ValueError(f"unknown ADK service {service!r}")
        return {}

    async def append(self, name: str, session: str, start: int, count: int) -> dict[str, Any]:
        svc = self.services[name]
        events = [adk_event(i) for i in range(start, start + count)]
        began = time.perf_counter()
        current = self.sessions.get((name, session))
        if current is None:
            current = await svc.create_session(app_name=APP, user_id=USER, session_id=session)
            self.sessions[name, session] = current
        for event in events:
            await svc.append_event(current, event)
        return {"seconds": time.perf_counter() - began}

    async def get(self, name: str, session: str, calls: int, recent: int | None) -> dict[str, Any]:
        svc = self.services[name]
        config = None if recent is None else GetSessionConfig(num_recent_events=recent)
        seconds: list[float] = []
        loaded = 0
        for _ in range(calls):
            began = time.perf_counter()
            got = await svc.get_session(
                app_name=APP, user_id=USER, session_id=session, config=config
            )
            seconds.append(time.perf_counter() - began)
            if got is None:
                raise RuntimeError(f"ADK lost session {session}")
            loaded = len(got.events)
        return {"seconds": seconds, "events": loaded}

    async def close(self) -> None:
        for svc in self.services.values():
            closer = getattr(svc, "close", None)
            if closer is not None:
                await closer()


if __name__ == "__main__":
    asyncio.run(serve(Worker()))
