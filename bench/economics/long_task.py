"""A long single-task coding agent, generated: one user turn of 40-80 tool steps.

The shape τ-bench lacks: a 5-15k-token system prompt and tool list, one
request, then a long tool loop whose file reads are 1-8k tokens with a heavy
tail (a Pareto draw, capped). Later steps use what earlier results showed:
a read opens a path a search listed, a patch names a path and a function a
read showed (often many steps back), a test run names a test a search found.
Seeded: dev seeds 0-4, test seeds 5-9, each run byte for byte the same.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from bench.economics.traces import Trace, count
from sidecar.model import Event, Role, ToolCall, ToolResult

SEEDS = {"dev": range(0, 5), "test": range(5, 10)}
WINDOW = 200_000
_WORDS = [
    "ledger",
    "invoice",
    "refund",
    "shard",
    "cache",
    "lease",
    "quorum",
    "replica",
    "batch",
    "cursor",
    "token",
    "retry",
    "budget",
    "window",
    "queue",
    "commit",
    "snapshot",
    "schema",
    "rollout",
    "canary",
    "drain",
    "socket",
    "handshake",
    "tenant",
]
_VERBS = ("load", "apply", "merge", "split", "check", "build", "flush", "parse", "emit", "sync")
_START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
_TOOLS = ("read_file", "grep", "run_tests", "apply_patch", "list_dir")


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _tool_schemas(rng: random.Random, tokens: int) -> str:
    """A tool list of about ``tokens`` tokens: the five tools, with long descriptions."""
    schemas: list[dict[str, object]] = []
    while True:
        for name in _TOOLS:
            schemas.append(
                {
                    "name": f"{name}_{len(schemas)}" if len(schemas) >= len(_TOOLS) else name,
                    "description": _prose(rng, 60),
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                }
            )
        text = json.dumps(schemas)
        if count(text) >= tokens:
            return text


def _system(rng: random.Random, tokens: int) -> str:
    paragraphs: list[str] = []
    while count("\n\n".join(paragraphs)) < tokens:
        paragraphs.append(_prose(rng, 120) + ".")
    return "You are a coding agent working in a large repository.\n\n" + "\n\n".join(paragraphs)


def _file(rng: random.Random, path: str, functions: list[str], tokens: int) -> str:
    """Source text of about ``tokens`` tokens, defining ``functions`` along the way."""
    lines = [f"# {path}"]
    per_function = max(1, tokens // 12 // max(1, len(functions)))
    for fn in functions:
        lines.append(f"def {fn}(request, limit={rng.randint(1, 500)}):")
        for _ in range(per_function):
            a, b = rng.choice(_WORDS), rng.choice(_WORDS)
            lines.append(f"    {a}_{b} = {rng.choice(_VERBS)}_{b}({a}, {rng.randint(0, 99)})")
    return "\n".join(lines)


def coding_task(seed: int, steps: int | None = None) -> Trace:
    """One generated task: its system prompt and tool list, one user turn, the tool loop
    (of ``steps`` tool steps: by default 40-80, drawn from the seed)."""
    rng = random.Random(seed)
    overhead = rng.randint(5_000, 15_000)
    tools = _tool_schemas(rng, overhead // 3)
    system = _system(rng, overhead - count(tools))
    modules = [
        f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{i}.py" for i in range(rng.randint(30, 60))
    ]
    functions = {
        m: [f"{rng.choice(_VERBS)}_{rng.choice(_WORDS)}_{i}{j}" for j in range(rng.randint(2, 6))]
        for i, m in enumerate(modules)
    }
    tests = [f"test_{rng.choice(_WORDS)}_{rng.randint(100, 999)}" for _ in range(12)]
    events: list[Event] = []

    def add(role: Role, **fields: object) -> str:
        eid = f"task{seed}-{len(events):03d}"
        at = _START + timedelta(seconds=5 * len(events))
        events.append(Event(id=eid, role=role, create_time=at, **fields))  # type: ignore[arg-type]
        return eid

    failing = rng.choice(tests)
    add(Role.USER, text=f"{failing} fails on main since yesterday; find the cause and fix it.")
    listed: list[str] = []  # paths a result has shown
    read: list[str] = []  # paths read (their functions shown)
    found_tests: list[str] = []
    drawn = rng.randint(40, 80)
    for step in range(drawn if steps is None else steps):
        kind = rng.random()
        if not listed or kind < 0.2:
            pattern = rng.choice(_WORDS)
            hits = rng.sample(modules, rng.randint(3, 8))
            shown = rng.sample(tests, 2)
            found_tests += shown
            listed += hits
            lines = [f"{p}:{rng.randint(1, 900)}: {pattern} = ..." for p in hits]
            lines += [f"tests/test_{pattern}.py:{rng.randint(1, 90)}: def {t}():" for t in shown]
            name, args, output = "grep", {"pattern": pattern}, "\n".join(lines)
        elif kind < 0.65 or not read:
            path = rng.choice(listed)
            read.append(path)
            size = min(8_000, int(1_000 * rng.paretovariate(1.6)))
            name, args = "read_file", {"path": path}
            output = _file(rng, path, functions[path], size)
        elif kind < 0.85:
            path = rng.choice(read)
            fn = rng.choice(functions[path])
            name, args = "apply_patch", {"path": path, "function": fn, "patch": _prose(rng, 30)}
            output = f"patched {path} ({fn})"
        else:
            test = rng.choice(found_tests or [failing])
            name, args = "run_tests", {"test": test}
            failed = rng.random() < 0.5
            output = f"{test} {'FAILED' if failed else 'passed'} in {rng.randint(1, 90)}.{step}s"
        call = ToolCall(f"task{seed}-call{step}", name, json.dumps(args, sort_keys=True))
        add(Role.ASSISTANT, text=_prose(rng, rng.randint(5, 20)), tool_calls=(call,))
        add(Role.TOOL, tool_results=(ToolResult(call.id, name, output),))
    edited = sorted({p for p in read[-3:]})
    add(Role.ASSISTANT, text=f"Fixed {failing}: changed {', '.join(edited)}.")
    return Trace(
        f"coding-task-{seed}",
        system,
        tools,
        tuple(events),
        count(system) + count(tools),
        WINDOW,
        5.0,
    )


def coding_tasks(split: str, steps: int | None = None) -> list[Trace]:
    """The generated coding tasks of ``split`` ("dev" or "test")."""
    return [coding_task(s, steps) for s in SEEDS[split]]
