"""Three long, deterministic transcripts with planted facts that later turns need.

Each is generated from a seeded ``random.Random``, so every run replays the
same events byte for byte:

- ``ops``: a tool-heavy operations agent (kubectl, logs, metrics, runbooks),
  1-4 tool loops a turn with results of 150-900 tokens;
- ``coding``: a coding agent whose turns read whole files (1,000-4,000
  tokens), grep and run tests;
- ``chat``: a chat assistant with no tools, long answers and the odd pasted
  document.

Each plants a few facts that later turns need: planted-fact probes
(``bench.economics.probes``), each stated once, with look-alike decoys in
other turns, and asked for much later in other words, the answer stating
it. Retention is judged on them as on every trace
(``bench.economics.retention``); the probes' outcomes (held, recalled, a
decoy only, missing) are reported beside it. Apart from the probes these
transcripts' steps use almost no identifiers from earlier messages.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bench.economics.probes import Plan, Probe, ProbeSpec
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
class Transcript:
    """A session to replay: its turns (each starting with the user's event) and probes.

    ``window_tokens`` is the input window of the model the agent calls;
    ``overhead_tokens`` the system prompt and tool schemas sent ahead of the
    window on every call (outside the session's log). Calls are
    ``call_gap_s`` apart within a turn and turns ``turn_gap_s`` apart, with
    a ``pause_s`` break before every ``pause_every``-th turn (a person away):
    the pace the prompt-cache TTL is judged at.
    """

    name: str
    turns: tuple[tuple[Event, ...], ...]
    probes: tuple[Probe, ...]
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


def ops(turns: int = 300, window_tokens: int = 128_000, seed: int = 301) -> Transcript:
    """The operations agent: incidents, each investigated with 2-5 tool loops."""
    rng = random.Random(seed)
    b = _Builder("ops")

    def order() -> str:
        return f"ORD-{rng.randint(10000, 99999)}"

    def host() -> str:
        return f"db-replica-{rng.randint(10, 99)}.eu-west-{rng.randint(1, 3)}"

    def ticket() -> str:
        return f"INC-{rng.randint(1000, 9999)}"

    def pool() -> str:
        return f"max_connections:{rng.randint(150, 900)}"

    def freeze() -> str:
        return f"2026-12-{rng.randint(1, 28):02d}T{rng.randint(10, 23)}:00Z"

    specs = [
        ProbeSpec("order", order(),
                  "Customer Dana Whitfield's refund is stuck; her order is {v}. Keep it in mind.",
                  "Which purchase was it whose money never made it back to the customer?",
                  (("Unrelated: Omar Haddad's refund went through, order {v}.", order()),
                   ("Dana Whitfield also placed a second order, {v}; it shipped fine.", order()))),
        ProbeSpec("lagging host", host(),
                  "The lagging replica host is {v}; we'll revisit it.",
                  "Remind me which database copy was falling behind?",
                  (("The healthy replica is {v}, no lag there.", host()),
                   ("Replica {v} was rebuilt last month.", host()))),
        ProbeSpec("deploy freeze end", freeze(),
                  "Decision for the team: freeze deploys until {v}. Note it.",
                  "Until when are we holding off on shipping changes?",
                  (("The last freeze ended {v}.", freeze()),)),
        ProbeSpec("postmortem ticket", ticket(),
                  "Open the postmortem under ticket {v}.",
                  "Under what number are we writing up the post-incident review?",
                  (("The customer-facing incident from last week is {v}.", ticket()),
                   ("Ticket {v} tracks the certificate rotation.", ticket()))),
        ProbeSpec("pool limit", pool(),
                  "The pgbouncer pool setting we agreed on is {v}.",
                  "What limit did we settle on for the connection pooler?",
                  (("The old pgbouncer pool setting was {v}.", pool()),
                   ("The database itself allows {v}.", pool()))),
    ]  # fmt: skip
    plan = Plan(rng, turns, specs)
    for n in range(turns):
        service = rng.choice(_SERVICES)
        alert = plan.message(n)
        b.user(alert or f"{service} is alerting: {_sentence(rng, rng.randint(6, 16))} Look?")
        planted = plan.planted(n)
        for loop in range(rng.randint(1, 4)):
            calls: list[tuple[str, dict[str, object], str]] = []
            for _ in range(rng.randint(1, 2)):
                tool = rng.choice(["kubectl_get", "search_logs", "query_metrics", "describe_pod"])
                lines = rng.randint(4, 24)
                extra = ""
                if planted is not None and loop == 0 and planted.name == "lagging host":
                    extra = f"replication lag 41s on {planted.value}"
                calls.append((tool, {"service": service, "window": "1h"},
                              _log_lines(rng, service, lines, extra)))  # fmt: skip
            b.tools(_sentence(rng, rng.randint(4, 10)), calls)
        answer = plan.answer(n) or _sentence(rng, rng.randint(20, 60))
        b.say(f"{answer} {_sentence(rng, rng.randint(10, 30))}")
    return Transcript(
        "ops", _freeze(b), tuple(plan.probes), window_tokens, 3_000, 8.0, 60.0, 40, 600.0
    )


def coding(turns: int = 200, window_tokens: int = 128_000, seed: int = 202) -> Transcript:
    """The coding agent: each turn reads one or two whole files, greps, runs tests."""
    rng = random.Random(seed)
    b = _Builder("coding")
    modules = [f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{i}.py" for i in range(60)]

    def shards() -> str:
        return f"LEDGER_SHARDS:{rng.randint(4, 64)}"

    specs = [
        ProbeSpec("file", f"src/billing/rounding_{rng.randint(10, 99)}.py",
                  "The invoice rounding bug lives in {v}; remember that file.",
                  "Where was the code that gets the cents wrong on bills?",
                  (("Tax rounding is handled in {v}, which is fine.",
                    f"src/billing/rounding_{rng.randint(10, 99)}.py"),
                   ("The old invoice code was in {v}.",
                    f"src/legacy/invoice_{rng.randint(10, 99)}.py"))),
        ProbeSpec("decision record", f"ADR-{rng.randint(10, 99)}",
                  "Ledger locking decision recorded as {v}: advisory locks.",
                  "Which architecture record holds what we chose for serializing ledger writes?",
                  (("{v} covers the payments retry policy.", f"ADR-{rng.randint(10, 99)}"),)),
        ProbeSpec("test", f"test_refund_partial_{rng.randint(100, 999)}",
                  "The flaky refund test is named {v}; we'll quarantine it later.",
                  "What's the name of the test that fails now and then on returns?",
                  (("{v} passes reliably.", f"test_refund_full_{rng.randint(100, 999)}"),
                   ("The flaky checkout test is {v}.",
                    f"test_checkout_partial_{rng.randint(100, 999)}"))),
        ProbeSpec("entry point", f"reconcile_batch_v{rng.randint(5, 9)}",
                  "The reconciliation entry point is {v}.",
                  "What do I call to start matching up the batches?",
                  (("{v} is deprecated; do not call it.",
                    f"reconcile_batch_v{rng.randint(2, 4)}"),)),
        ProbeSpec("shard setting", shards(),
                  "The ledger shard count variable in production is {v}.",
                  "How many partitions does the ledger run with in prod?",
                  (("In staging it is {v}.", shards()),)),
    ]  # fmt: skip
    plan = Plan(rng, turns, specs)
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
        b.say(f"{plan.answer(n) or 'Fixed.'} {_sentence(rng, rng.randint(15, 45))}")
    return Transcript(
        "coding", _freeze(b), tuple(plan.probes), window_tokens, 2_500, 6.0, 90.0, 25, 900.0
    )


def chat(turns: int = 150, window_tokens: int = 32_000, seed: int = 150) -> Transcript:
    """The chat assistant: questions, long answers, a pasted document now and then."""
    rng = random.Random(seed)
    b = _Builder("chat")

    def booking() -> str:
        return f"BK-{rng.randint(100000, 999999)}"

    specs = [
        ProbeSpec("booking reference", booking(),
                  "My Lisbon hotel booking reference is {v}, please remember it.",
                  "What's the confirmation number for where I'm staying in Portugal's capital?",
                  (("My Porto hotel booking reference is {v}.", booking()),
                   ("The Lisbon restaurant reservation is {v}.", booking()))),
        ProbeSpec("logo variant", f"LOGO-{rng.randint(10, 99)}",
                  "Final answer on the branding: we go with logo variant {v}.",
                  "Which emblem design did we pick in the end?",
                  (("Variant {v} was the runner-up.", f"LOGO-{rng.randint(10, 99)}"),)),
        ProbeSpec("budget cap", f"EUR{rng.randint(20, 90)}000",
                  "The marketing budget cap is {v} for the quarter.",
                  "How much can the promotion team spend this quarter at most?",
                  (("Last quarter's cap was {v}.", f"EUR{rng.randint(20, 90)}000"),)),
        ProbeSpec("codename", f"{rng.choice(['Aurora', 'Basalt', 'Cobalt'])}-{rng.randint(2, 9)}",
                  "The project codename is {v} from now on.",
                  "What are we calling the initiative internally these days?",
                  (("The previous project's codename was {v}.",
                    f"{rng.choice(['Delta', 'Ember', 'Flint'])}-{rng.randint(2, 9)}"),)),
    ]  # fmt: skip
    plan = Plan(rng, turns, specs)
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
        b.say("\n\n".join([*filter(None, [plan.answer(n)]), *paragraphs]))
    return Transcript(
        "chat", _freeze(b), tuple(plan.probes), window_tokens, 800, 0.0, 45.0, 30, 480.0
    )


def _freeze(b: _Builder) -> tuple[tuple[Event, ...], ...]:
    return tuple(tuple(turn) for turn in b.turns)


TRANSCRIPTS: dict[str, tuple[Callable[..., Transcript], int, int]] = {
    "ops": (ops, 300, 128_000),
    "coding": (coding, 200, 128_000),
    "chat": (chat, 150, 32_000),
}
"""Each transcript's generator, with its full length in turns and its model's window."""
