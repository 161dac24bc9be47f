"""A realistic 40-turn agent transcript, for the demo and the benchmarks.

A coding agent helps an engineer chase a latency regression in a checkout
service: user requests, assistant replies, parallel tool calls and their
results, a stored system prompt that is later revised, and a screenshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from sidecar.model import Event, Part, Role, ToolCall, ToolResult

SYSTEM_PROMPT = (
    "You are a senior SRE assistant working in the checkout-service repository. "
    "Use the tools to inspect code, logs and metrics before answering. Quote file "
    "paths and numbers exactly. Never run destructive commands."
)
REVISED_SYSTEM_PROMPT = (
    SYSTEM_PROMPT + " The user prefers short answers with a one-line verdict first."
)

_FILES = [
    "checkout/api/handlers.py",
    "checkout/db/pool.py",
    "checkout/cache/redis_client.py",
    "checkout/payments/stripe_adapter.py",
    "checkout/settings.py",
]
_ENDPOINTS = ["/cart", "/checkout", "/payment/confirm", "/orders/{id}"]


def _call(call_id: str, name: str, **args: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments_json=json.dumps(args, separators=(",", ":")))


def _turn(n: int) -> Iterator[tuple[Role, str, tuple[ToolCall, ...], tuple[ToolResult, ...]]]:
    """The events of turn ``n`` as (role, text, calls, results)."""
    path = _FILES[n % len(_FILES)]
    endpoint = _ENDPOINTS[n % len(_ENDPOINTS)]
    kind = n % 5
    calls: tuple[ToolCall, ...]
    if kind == 0:
        yield (
            Role.USER,
            f"p99 latency on {endpoint} jumped again. Can you check the last hour?",
            (),
            (),
        )
        calls = (
            _call(f"c{n}a", "query_metrics", metric="http_p99_ms", endpoint=endpoint, window="1h"),
            _call(f"c{n}b", "search_logs", query=f"{endpoint} status:5xx", window="1h"),
        )
        yield Role.ASSISTANT, "Checking metrics and logs in parallel.", calls, ()
        yield (
            Role.TOOL,
            "",
            (),
            (
                ToolResult(
                    calls[0].id, "query_metrics", f"p50=41ms p99={380 + 7 * n}ms (baseline 120ms)"
                ),
            ),
        )
        yield (
            Role.TOOL,
            "",
            (),
            (
                ToolResult(
                    calls[1].id, "search_logs", f"{3 + n % 4} errors: TimeoutError in {path}"
                ),
            ),
        )
        yield (
            Role.ASSISTANT,
            (
                f"p99 on {endpoint} is {380 + 7 * n} ms against a 120 ms baseline; the 5xx are "
                f"timeouts raised from {path}."
            ),
            (),
            (),
        )
    elif kind == 1:
        yield Role.USER, f"Show me the relevant part of {path}.", (), ()
        call = _call(f"c{n}", "read_file", path=path, start=1, end=60)
        yield Role.ASSISTANT, "", (call,), ()
        body = "\n".join(f"{i:3d}  # line {i} of {path}" for i in range(1, 25))
        yield Role.TOOL, "", (), (ToolResult(call.id, "read_file", body),)
        yield (
            Role.ASSISTANT,
            (
                f"In {path} the pool is created with max_size=5 and a 30 s acquire timeout, so "
                "under burst traffic requests queue for a connection."
            ),
            (),
            (),
        )
    elif kind == 2:
        yield Role.USER, "Run the load test against staging with 200 virtual users.", (), ()
        call = _call(f"c{n}", "run_load_test", target="staging", users=200, duration_s=120)
        yield Role.ASSISTANT, "Starting the load test.", (call,), ()
        yield (
            Role.TOOL,
            "",
            (),
            (ToolResult(call.id, "run_load_test", f"rps=812 p99={410 + n}ms errors=1.{n % 9}%"),),
        )
        yield Role.ASSISTANT, f"Staging reproduces it: p99 {410 + n} ms at 812 rps.", (), ()
    elif kind == 3:
        yield Role.USER, "Compare with yesterday's deploy, what changed?", (), ()
        calls = (
            _call(f"c{n}a", "git_log", since="2 days ago", path="checkout/"),
            _call(f"c{n}b", "git_diff", rev="HEAD~3..HEAD", path=path),
            _call(f"c{n}c", "get_deploys", service="checkout", limit=3),
        )
        yield Role.ASSISTANT, "", calls, ()
        yield (
            Role.TOOL,
            "",
            (),
            (
                ToolResult(calls[0].id, "git_log", "a1b2c3 reduce pool size to save connections"),
                ToolResult(calls[1].id, "git_diff", "-    max_size=20\n+    max_size=5"),
                ToolResult(calls[2].id, "get_deploys", "v2.41.0 deployed 2026-11-28T16:02Z"),
            ),
        )
        yield (
            Role.ASSISTANT,
            (
                "Commit a1b2c3 in v2.41.0 cut the pool from 20 to 5 connections; that matches "
                "the start of the regression."
            ),
            (),
            (),
        )
    else:
        yield Role.USER, "OK. Draft the fix but don't merge anything yet.", (), ()
        call = _call(f"c{n}", "write_patch", path="checkout/db/pool.py", change="max_size=20")
        yield Role.ASSISTANT, "", (call,), ()
        yield (
            Role.TOOL,
            "",
            (),
            (ToolResult(call.id, "write_patch", f"patch saved as fix-pool-{n}.diff"),),
        )
        yield (
            Role.ASSISTANT,
            f"Drafted fix-pool-{n}.diff restoring max_size=20; not merged.",
            (),
            (),
        )


def transcript(turns: int = 40) -> list[Event]:
    """The transcript as events (without token counts; the store fills them in)."""
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    events: list[Event] = []

    def add(
        role: Role,
        text: str,
        calls: tuple[ToolCall, ...] = (),
        results: tuple[ToolResult, ...] = (),
        parts: tuple[Part, ...] = (),
    ) -> None:
        events.append(
            Event(
                id=f"e{len(events) + 1:04d}",
                role=role,
                text=text,
                tool_calls=calls,
                tool_results=results,
                parts=parts,
                author="sre-agent" if role is Role.ASSISTANT else "",
                create_time=start + timedelta(seconds=20 * len(events)),
            )
        )

    add(Role.SYSTEM, SYSTEM_PROMPT)
    for n in range(turns):
        if n == 20:
            add(Role.SYSTEM, REVISED_SYSTEM_PROMPT)
        if n == 12:
            add(
                Role.USER,
                "Here is the Grafana panel I'm looking at.",
                parts=(Part("image/png", data=b"\x89PNG\r\n\x1a\n" + bytes(2048)),),
            )
            add(Role.ASSISTANT, "The panel shows the p99 step at 16:05, right after the deploy.")
            continue
        if n == 30:
            add(Role.USER, "¿Puedes resumir en español lo que hemos encontrado hasta ahora?")
            add(
                Role.ASSISTANT,
                "Claro: la regresión viene del commit a1b2c3, que redujo el pool de 20 a 5.",
            )
            continue
        for role, text, calls, results in _turn(n):
            add(role, text, calls, results)
    return events
