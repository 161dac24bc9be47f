"""The traces the benchmark replays: τ-bench's airline runs as shipped, and generated shapes.

A ``Trace`` is one session as the agent lived it: its pinned system prompt
and tool list (sent ahead of the window on every call, nobody's to compact),
then its events in order. Every assistant event is a model call's answer, so
the replay calls the model (reads GetContext) before each one.

- ``tau_airline(split)``: τ-bench's 200 GPT-4o airline trajectories
  (``../shared/data/tau-bench/``, MIT), dev = task ids 0-24, test = 25-49,
  the trials asked for (4 per task are shipped). Its tool list is the
  environment's 14 tool schemas at the same commit
  (``data/tau_airline_tools.json``). Calls are taken ``CALL_GAP_S`` apart: the
  trajectories carry no times, and a user answering takes about that.
- ``from_transcript``: one of the seeded synthetic transcripts
  (``bench.economics.transcripts``), flattened, its overhead as a count, its
  planted-fact probes with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.economics.probes import ProbeCheck
from bench.economics.transcripts import Transcript
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.tokenizer import TiktokenEstimator

TAU_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "tau-bench"
"""Where the τ-bench trajectories are (``/work/shared/data/tau-bench`` beside the repo)."""
TAU_FILE = "gpt-4o-airline.json"
TAU_TOOLS = Path(__file__).parent / "data" / "tau_airline_tools.json"
SPLITS = {"dev": range(0, 25), "test": range(25, 50)}
"""τ-bench task ids: settings are chosen on dev, every reported figure is on test."""
CALL_GAP_S = 10.0


@dataclass(frozen=True, slots=True)
class Trace:
    """One session to replay: ``system`` and ``tools`` pinned ahead of ``events``.

    ``overhead_tokens``: the system prompt and tool list as billed on each
    call; ``window_tokens``: the input window of the model the agent calls;
    ``probes``: its planted-fact probes, if it has any (``bench.economics.probes``).
    """

    name: str
    system: str
    tools: str
    events: tuple[Event, ...]
    overhead_tokens: int
    window_tokens: int = 128_000
    call_gap_s: float = CALL_GAP_S
    probes: tuple[ProbeCheck, ...] = ()


def count(text: str) -> int:
    return TiktokenEstimator().count(text)


def tau_dir() -> Path:
    """The τ-bench data directory (``TAU_DATA``, or ``/work/shared/data/tau-bench``)."""
    for candidate in (TAU_DATA, Path("/work/shared/data/tau-bench")):
        if (candidate / TAU_FILE).is_file():
            return candidate
    raise FileNotFoundError(f"τ-bench trajectories not found: {TAU_DATA / TAU_FILE}")


def _tau_events(run: dict[str, Any], prefix: str) -> tuple[str, tuple[Event, ...]]:
    """A trajectory as our events: its system prompt, and the rest with unique ids.

    τ-bench reuses a tool-call id within a run; each call gets the run's own
    id here, and a result answers the newest call that had its original id.
    """
    system = ""
    events: list[Event] = []
    calls: dict[str, str] = {}
    for n, message in enumerate(run["traj"]):
        role, text = message["role"], message.get("content") or ""
        eid = f"{prefix}-{n:03d}"
        if role == "system":
            system += text
        elif role == "user":
            events.append(Event(id=eid, role=Role.USER, text=text))
        elif role == "assistant":
            made = []
            for i, call in enumerate(message.get("tool_calls") or ()):
                ours = f"{eid}-c{i}"
                calls[call["id"]] = ours
                made.append(ToolCall(ours, call["function"]["name"], call["function"]["arguments"]))
            events.append(Event(id=eid, role=Role.ASSISTANT, text=text, tool_calls=tuple(made)))
        elif role == "tool":
            answered = calls.get(message["tool_call_id"], message["tool_call_id"])
            result = ToolResult(answered, message.get("name", ""), text)
            events.append(Event(id=eid, role=Role.TOOL, tool_results=(result,)))
    return system, tuple(events)


def tau_airline(split: str, trials: Sequence[int] = (0, 1, 2, 3)) -> list[Trace]:
    """τ-bench's airline runs of ``split`` ("dev" or "test"), the given trials of each task."""
    tasks = SPLITS[split]
    runs = json.loads((tau_dir() / TAU_FILE).read_text())
    tools = json.dumps(json.loads(TAU_TOOLS.read_text())["tools"])
    tool_tokens = count(tools)
    out = []
    for run in sorted(runs, key=lambda r: (r["task_id"], r["trial"])):
        if run["task_id"] not in tasks or run["trial"] not in trials:
            continue
        name = f"tau-{run['task_id']}-{run['trial']}"
        system, events = _tau_events(run, name)
        out.append(Trace(name, system, tools, events, count(system) + tool_tokens))
    return out


def from_transcript(t: Transcript) -> Trace:
    """A synthetic transcript as a trace: its turns in order, its overhead as a count, its
    probes answered by the last event of the turn that asks for each."""
    events = tuple(e for turn in t.turns for e in turn)
    probes = tuple(ProbeCheck(t.turns[p.needed_turn][-1].id, p.value, p.decoys) for p in t.probes)
    return Trace(t.name, "", "", events, t.overhead_tokens, t.window_tokens, t.call_gap_s, probes)
