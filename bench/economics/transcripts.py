"""Three long, deterministic transcripts with planted facts that later turns need.

Each is generated from a seeded ``random.Random``, so every run replays the
same events byte for byte:

- ``ops``: a tool-heavy operations agent (kubectl, logs, metrics, runbooks),
  1-4 tool loops a turn with results of 150-900 tokens;
- ``coding``: a coding agent whose turns read whole files (1,000-4,000
  tokens), grep and run tests;
- ``chat``: a chat assistant with no tools, long answers and the odd pasted
  document.

A ``Fact`` is planted in one turn (a user message, a tool result or an
answer) and needed in a later one, whose user message asks for it by topic.
The benchmark no longer scores these planted-fact probes (their questions
reused the fact's own words and an oracle decided when to search, so every
policy scored 1.00); it judges retention instead (``bench.economics.retention``).
These transcripts' steps use almost no identifiers from earlier results, so
on them retention says little and the figures are about cost.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sidecar.model import Event, Role, ToolCall, ToolResult

_WORDS = tuple(
    [
        "pod",
        "node",
        "deploy",
        "rollout",
        "replica",
        "latency",
        "timeout",
        "retry",
        "upstream",
        "queue",
        "backlog",
        "shard",
        "cache",
        "miss",
        "eviction",
        "lease",
        "leader",
        "quorum",
        "socket",
        "handshake",
        "certificate",
        "ingress",
        "egress",
        "throttle",
        "budget",
        "alert",
        "page",
        "runbook",
        "canary",
        "baseline",
        "regression",
        "spike",
        "drain",
        "cordon",
    ]
)
_SERVICES = ("checkout", "payments", "inventory", "search", "auth", "ledger", "notify")
_LEVELS = ("INFO", "INFO", "INFO", "WARN", "ERROR")
_START = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Fact:
    """A value planted in ``planted_turn`` that the user asks for in ``needed_turn``.

    ``query`` names the fact's topic in words of the planting turn (what an
    agent would search for), never its value.
    """

    name: str
    value: str
    query: str
    planted_turn: int
    needed_turn: int


@dataclass(frozen=True, slots=True)
class Transcript:
    """A session to replay: its turns (each starting with the user's event) and facts.

    ``window_tokens`` is the input window of the model the agent calls;
    ``overhead_tokens`` the system prompt and tool schemas sent ahead of the
    window on every call (outside the session's log). Calls are
    ``call_gap_s`` apart within a turn and turns ``turn_gap_s`` apart, with
    a ``pause_s`` break before every ``pause_every``-th turn (a person away):
    the pace the prompt-cache TTL is judged at.
    """

    name: str
    turns: tuple[tuple[Event, ...], ...]
    facts: tuple[Fact, ...]
    window_tokens: int
    overhead_tokens: int
    call_gap_s: float
    turn_gap_s: float
    pause_every: int
    pause_s: float

    @property
    def events(self) -> int:
        return sum(len(t) for t in self.turns)


class _Builder:
    """Events of one transcript with stable ids (``<name>-<n>``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.turns: list[list[Event]] = []

    def _id(self) -> str:
        self.count += 1
        return f"{self.name}-{self.count:05d}"

    def _event(
        self,
        role: Role,
        text: str = "",
        tool_calls: tuple[ToolCall, ...] = (),
        tool_results: tuple[ToolResult, ...] = (),
    ) -> Event:
        """An event with the next id and a fixed create time (so runs are alike byte for byte)."""
        at = _START + timedelta(seconds=10 * self.count)
        return Event(
            id=self._id(),
            role=role,
            text=text,
            tool_calls=tool_calls,
            tool_results=tool_results,
            create_time=at,
        )

    def user(self, text: str) -> None:
        self.turns.append([self._event(Role.USER, text=text)])

    def say(self, text: str) -> None:
        self.turns[-1].append(self._event(Role.ASSISTANT, text=text))

    def tools(self, text: str, calls: list[tuple[str, dict[str, object], str]]) -> None:
        """One tool loop: an assistant event with ``calls``, then one TOOL event per result."""
        made = [
            ToolCall(f"{self.name}-c{self.count}-{i}", name, json.dumps(args, sort_keys=True))
            for i, (name, args, _) in enumerate(calls)
        ]
        self.turns[-1].append(self._event(Role.ASSISTANT, text=text, tool_calls=tuple(made)))
        for call, (_, _, output) in zip(made, calls, strict=True):
            result = ToolResult(call.id, call.name, output)
            self.turns[-1].append(self._event(Role.TOOL, tool_results=(result,)))


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _log_lines(rng: random.Random, service: str, lines: int, extra: str = "") -> str:
    out = []
    for i in range(lines):
        stamp = (
            f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
        )
        out.append(
            f"{stamp}Z {service}-{rng.randint(1000, 9999):x} {rng.choice(_LEVELS)} "
            f"{_sentence(rng, rng.randint(5, 12))} req={rng.getrandbits(32):08x} "
            f"ms={rng.randint(3, 4000)}"
        )
        if extra and i == lines // 2:
            out.append(extra)
    return "\n".join(out)


def _code(rng: random.Random, path: str, lines: int, extra: str = "") -> str:
    out = [f"# {path}"]
    for i in range(lines):
        name = "_".join(rng.choice(_WORDS) for _ in range(2))
        kind = rng.random()
        if kind < 0.15:
            out.append(f"def {name}(request, limit={rng.randint(1, 500)}):")
        elif kind < 0.3:
            out.append(f"    # {_sentence(rng, rng.randint(4, 10))}")
        else:
            out.append(f"    {name} = compute_{rng.choice(_WORDS)}({name}, {rng.randint(0, 99)})")
        if extra and i == lines // 3:
            out.append(extra)
    return "\n".join(out)


class _Plan:
    """Where each fact is planted and asked for: in the first fifth, and 40-90 % further on.

    ``kinds`` are (name, value, query, the planting message with ``{v}`` for the value).
    """

    def __init__(
        self, rng: random.Random, turns: int, kinds: list[tuple[str, str, str, str]]
    ) -> None:
        self.facts: list[Fact] = []
        self._planted: dict[int, tuple[Fact, str]] = {}
        for i, (name, value, query, template) in enumerate(kinds):
            planted = 2 + i * max(1, turns // (5 * len(kinds)))
            needed = min(planted + int(turns * (0.4 + 0.5 * rng.random())), turns - 1)
            fact = Fact(name, value, query, planted, needed)
            self.facts.append(fact)
            self._planted[planted] = (fact, template)
        self._needed = {f.needed_turn: f for f in self.facts}

    def planted(self, turn: int) -> Fact | None:
        found = self._planted.get(turn)
        return found[0] if found else None

    def message(self, turn: int) -> str | None:
        """The user's message of ``turn`` when it plants a fact or asks for one."""
        if turn in self._planted:
            fact, template = self._planted[turn]
            return template.format(v=fact.value)
        if turn in self._needed:
            fact = self._needed[turn]
            return f"Back to the {fact.query}: what was the {fact.name}?"
        return None


def ops(turns: int = 300, window_tokens: int = 128_000, seed: int = 301) -> Transcript:
    """The operations agent: incidents, each investigated with 2-5 tool loops."""
    rng = random.Random(seed)
    b = _Builder("ops")
    kinds = [
        ("order number", f"ORD-{rng.randint(10000, 99999)}", "Whitfield refund order",
         "Customer Dana Whitfield's refund is stuck; her order is {v}. Keep it in mind."),
        ("hostname", f"db-replica-{rng.randint(10, 99)}.eu-west-{rng.randint(1, 3)}",
         "replica lagging host", "The lagging replica host is {v}; we'll revisit it."),
        ("decision", f"freeze deploys until {rng.choice(['Friday', 'Monday'])} 18:00 UTC",
         "team decision freeze deploys", "Decision for the team: {v}. Note it."),
        ("ticket", f"INC-{rng.randint(1000, 9999)}", "postmortem ticket",
         "Open the postmortem under ticket {v}."),
        ("config value", f"max_connections={rng.randint(150, 900)}", "pgbouncer pool setting",
         "The pgbouncer pool setting we agreed on is {v}."),
        ("on-call", f"{rng.choice(['Priya', 'Lena'])} {rng.choice(['Okafor', 'Moreau'])}",
         "escalations on-call engineer", "Escalations go to on-call engineer {v} this week."),
    ]  # fmt: skip
    plan = _Plan(rng, turns, kinds)
    for n in range(turns):
        service = rng.choice(_SERVICES)
        alert = plan.message(n)
        b.user(alert or f"{service} is alerting: {_sentence(rng, rng.randint(6, 16))} Look?")
        host = plan.planted(n)
        for loop in range(rng.randint(1, 4)):
            calls: list[tuple[str, dict[str, object], str]] = []
            for _ in range(rng.randint(1, 2)):
                tool = rng.choice(["kubectl_get", "search_logs", "query_metrics", "describe_pod"])
                lines = rng.randint(4, 24)
                extra = ""
                if host is not None and loop == 0 and host.name == "hostname":
                    extra = f"replication lag 41s on {host.value}"
                calls.append((tool, {"service": service, "window": "1h"},
                              _log_lines(rng, service, lines, extra)))  # fmt: skip
            b.tools(_sentence(rng, rng.randint(4, 10)), calls)
        b.say(f"{_sentence(rng, rng.randint(20, 60))} {_sentence(rng, rng.randint(10, 30))}")
    return Transcript(
        "ops", _freeze(b), tuple(plan.facts), window_tokens, 3_000, 8.0, 60.0, 40, 600.0
    )


def coding(turns: int = 200, window_tokens: int = 128_000, seed: int = 202) -> Transcript:
    """The coding agent: each turn reads one or two whole files, greps, runs tests."""
    rng = random.Random(seed)
    b = _Builder("coding")
    modules = [f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{i}.py" for i in range(60)]
    kinds = [
        ("file path", f"src/billing/rounding_{rng.randint(10, 99)}.py", "invoice rounding bug file",
         "The invoice rounding bug lives in {v}; remember that file."),
        ("decision", f"use {rng.choice(['advisory locks', 'SELECT FOR UPDATE'])} for the ledger",
         "ledger locking decision", "Ledger locking decision: {v} (ADR-17)."),
        ("test name", f"test_refund_partial_{rng.randint(100, 999)}", "flaky refund test",
         "The flaky refund test is named {v}; we'll quarantine it later."),
        ("function", f"reconcile_batch_v{rng.randint(2, 9)}", "reconciliation entry point",
         "The reconciliation entry point is {v}."),
        ("env var", f"LEDGER_SHARDS={rng.randint(4, 64)}", "ledger shard count variable",
         "The ledger shard count variable in production is {v}."),
    ]  # fmt: skip
    plan = _Plan(rng, turns, kinds)
    for n in range(turns):
        path = rng.choice(modules)
        b.user(plan.message(n) or f"In {path}: {_sentence(rng, rng.randint(8, 20))} Fix it.")
        for _ in range(rng.randint(1, 2)):
            target = rng.choice(modules)
            b.tools("Reading the file.", [("read_file", {"path": target},
                                           _code(rng, target, rng.randint(80, 300)))])  # fmt: skip
        b.tools("Searching for callers.", [("grep", {"pattern": rng.choice(_WORDS)},
                                            _code(rng, "grep", rng.randint(10, 40)))])  # fmt: skip
        edit: dict[str, object] = {"path": path, "patch": _sentence(rng, rng.randint(10, 30))}
        b.tools("Applying the change.", [("apply_patch", edit, "patch applied")])
        tests = _log_lines(rng, "pytest", rng.randint(5, 30))
        b.tools("Running the tests.", [("run_tests", {"path": "tests/"}, tests)])
        b.say(f"Fixed. {_sentence(rng, rng.randint(15, 45))}")
    return Transcript(
        "coding", _freeze(b), tuple(plan.facts), window_tokens, 2_500, 6.0, 90.0, 25, 900.0
    )


def chat(turns: int = 150, window_tokens: int = 32_000, seed: int = 150) -> Transcript:
    """The chat assistant: questions, long answers, a pasted document now and then."""
    rng = random.Random(seed)
    b = _Builder("chat")
    kinds = [
        ("booking reference", f"BK-{rng.randint(100000, 999999)}", "Lisbon hotel booking reference",
         "My Lisbon hotel booking reference is {v}, please remember it."),
        ("decision", f"the {rng.choice(['blue', 'green', 'amber'])} one",
         "branding logo variant", "Final answer on the branding logo variant: {v}."),
        ("budget", f"EUR {rng.randint(20, 90)},000", "marketing budget cap",
         "The marketing budget cap is {v} for the quarter."),
        ("name", f"{rng.choice(['Aurora', 'Basalt', 'Cobalt'])}-{rng.randint(2, 9)}",
         "project codename", "The project codename is {v} from now on."),
    ]  # fmt: skip
    plan = _Plan(rng, turns, kinds)
    for n in range(turns):
        message = plan.message(n)
        if message is not None:
            b.user(message)
        elif rng.random() < 0.15:
            doc = " ".join(_sentence(rng, rng.randint(12, 30)) for _ in range(rng.randint(20, 60)))
            b.user(f"Here is a draft, tighten it:\n{doc}")
        else:
            b.user(f"{_sentence(rng, rng.randint(8, 30))} What do you think?")
        paragraphs = [_sentence(rng, rng.randint(20, 45)) for _ in range(rng.randint(2, 8))]
        b.say("\n\n".join(paragraphs))
    return Transcript(
        "chat", _freeze(b), tuple(plan.facts), window_tokens, 800, 0.0, 45.0, 30, 480.0
    )


def _freeze(b: _Builder) -> tuple[tuple[Event, ...], ...]:
    return tuple(tuple(turn) for turn in b.turns)


TRANSCRIPTS: dict[str, tuple[Callable[..., Transcript], int, int]] = {
    "ops": (ops, 300, 128_000),
    "coding": (coding, 200, 128_000),
    "chat": (chat, 150, 32_000),
}
"""Each transcript's generator, with its full length in turns and its model's window."""
