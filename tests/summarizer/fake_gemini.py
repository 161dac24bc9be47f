"""A scripted stand-in for the Gemini REST API, so tests run the real SDK offline.

The server runs in a thread (stdlib ``http.server``), so a scripted delay
never blocks the test's event loop. Each request takes the next scripted
``Reply`` (or ``default`` when the script is empty) and is recorded as a
``Received`` for the test to assert on what the SDK actually sent.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: an HTTP status, a JSON body, and how long to wait first."""

    status: int = 200
    body: Json = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Received:
    """One request as the server saw it; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Json


def answer(
    text: str | None,
    *,
    finish: str | None = "STOP",
    prompt_tokens: int = 120,
    output_tokens: int = 30,
) -> Reply:
    """A generateContent answer with one candidate; ``text=None`` sends no parts."""
    candidate: Json = {"index": 0}
    if text is not None:
        candidate["content"] = {"role": "model", "parts": [{"text": text}]}
    if finish is not None:
        candidate["finishReason"] = finish
    return Reply(
        body={
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": output_tokens,
                "totalTokenCount": prompt_tokens + output_tokens,
            },
            "modelVersion": "gemini-2.5-flash",
        }
    )


def prompt_blocked(reason: str = "SAFETY") -> Reply:
    """The prompt itself was blocked: no candidates, only promptFeedback."""
    return Reply(
        body={
            "promptFeedback": {"blockReason": reason},
            "usageMetadata": {"promptTokenCount": 120, "totalTokenCount": 120},
        }
    )


def error(
    status: int, message: str, status_name: str, *, details: list[Json] | None = None
) -> Reply:
    """A Google API error body, as Gemini sends it."""
    err: Json = {"code": status, "message": message, "status": status_name}
    if details is not None:
        err["details"] = details
    return Reply(status=status, body={"error": err})


OVERLOADED = error(503, "The model is overloaded. Please try again later.", "UNAVAILABLE")


class FakeGemini:
    """The server's script and record. Use ``running()`` to start and stop it."""

    def __init__(self, default: Reply | None = None) -> None:
        self.default = default or error(500, "no reply scripted for this request", "INTERNAL")
        self.received: list[Received] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        # Set on shutdown so that a handler sleeping through a scripted delay
        # returns at once instead of holding its thread.
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        # A short poll interval: shutdown() waits up to one interval, per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def _next(self, received: Received) -> Reply:
        with self._lock:
            self.received.append(received)
            return self._script.popleft() if self._script else self.default

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def running(default: Reply | None = None) -> Iterator[FakeGemini]:
    """A started fake on a free port of 127.0.0.1, stopped on exit."""
    fake = FakeGemini(default)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def _handler_for(fake: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = fake._next(Received("POST", self.path, headers, body))
            if reply.delay_s and fake._stopping.wait(reply.delay_s):
                return
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the per-request log lines on stderr."""

    return Handler
