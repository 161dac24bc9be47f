"""ADK's own compaction as the benchmark's peer: the parent side of ``adk_peer_worker``.

ADK lives in its own venv (``.venv-adk``), so its ``Runner`` runs in a worker
process (``bench.economics.adk_peer_worker``) that answers, per model call,
the contents ADK really sent, and each summary call's prompt and summary.
Here they are turned into windows the way the server's events are counted
(``count_event``; a content's id is a hash of it, so an unchanged content
is an unchanged prefix for the cache) and judged, and the summary calls are
billed before the call they land in. The summary's length is the one every
fake summary has (``bench.economics.summary_size``, in characters in the
worker).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.economics.measure import Replayed, action_of, cache_key, source_of
from bench.economics.pricing import Call
from bench.economics.retention import Judge
from bench.economics.summary_size import RATIO
from bench.economics.traces import Trace
from bench.json_lines import ROOT, ask, stop
from sidecar.compaction.formatting import format_event
from sidecar.compaction.tokens import count_event
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.tokenizer import TiktokenEstimator

ADK_PYTHON = ROOT / ".venv-adk" / "bin" / "python"
PEERS = {
    "adk_interval": {"compaction_interval": 3, "overlap_size": 1},
    "adk_tokens": {"token_threshold": 4000, "event_retention_size": 5},
}
"""ADK's ``EventsCompactionConfig`` as its docs configure it."""
_LIMIT = 1 << 30  # one reply holds every request of a trace


def _trace_json(trace: Trace) -> dict[str, Any]:
    return {
        "name": trace.name,
        "system": f"{trace.system}\n{trace.tools}".strip(),
        "events": [
            {
                "role": e.role.value,
                "text": e.text,
                "calls": [
                    {"id": c.id, "name": c.name, "args": json.loads(c.arguments_json or "{}")}
                    for c in e.tool_calls
                ],
                "results": [
                    {"call_id": r.call_id, "name": r.name, "content": r.content}
                    for r in e.tool_results
                ],
            }
            for e in trace.events
        ],
    }


def as_event(content: dict[str, Any], arguments: dict[str, str]) -> Event:
    """One content ADK sent, as our event; its id a hash of the content."""
    eid = hashlib.sha1(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    texts = [p["text"] for p in content["parts"] if "text" in p]
    calls = tuple(
        ToolCall(str(p["call"]["id"]), p["call"]["name"],
                 arguments.get(str(p["call"]["id"]), json.dumps(p["call"]["args"])))
        for p in content["parts"] if "call" in p
    )  # fmt: skip
    results = tuple(
        ToolResult(str(p["result"]["id"]), p["result"]["name"],
                   str((p["result"]["response"] or {}).get("result", p["result"]["response"])))
        for p in content["parts"] if "result" in p
    )  # fmt: skip
    if results:
        return Event(id=eid, role=Role.TOOL, tool_results=results)
    role = Role.USER if content["role"] == "user" else Role.ASSISTANT
    return Event(id=eid, role=role, text="\n".join(texts), tool_calls=calls)


async def replay_adk(traces: list[Trace], peer: str, ratio: float = RATIO) -> list[Replayed]:
    """Replay each trace through ADK's Runner with ``peer``'s compaction config (one worker);
    its summaries at the length ``ratio`` gives (``summary_size``)."""
    process = await asyncio.create_subprocess_exec(
        str(ADK_PYTHON), "-m", "bench.economics.adk_peer_worker", cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=_LIMIT,
    )  # fmt: skip
    out = []
    try:
        for trace in traces:
            command = {"op": "replay", "trace": _trace_json(trace), "config": PEERS[peer],
                       "ratio": ratio}  # fmt: skip
            out.append(_judged(trace, await ask(process, "ADK peer worker", command)))
    finally:
        await stop(process)
    return out


def _judged(trace: Trace, reply: dict[str, Any]) -> Replayed:
    estimator = TiktokenEstimator()
    arguments = {c.id: c.arguments_json for e in trace.events for c in e.tool_calls}
    judge = Judge()
    judge.system(f"{trace.system} {trace.tools}")
    out = Replayed(trace.name)
    calls = iter(reply["calls"])
    clock = 0.0
    for event in trace.events:
        if event.role is Role.ASSISTANT:
            sent = next(calls, None)
            if sent is None:  # ADK's loop ended before the trace's (a turn without a user)
                break
            window = [replace(e, token_count=count_event(e)) for e in
                      (as_event(c, arguments) for c in sent["sent"])]  # fmt: skip
            out.calls.append(Call(clock, tuple(cache_key(e) for e in window)))
            clock += trace.call_gap_s
            action = action_of(event)
            texts = [format_event(e) for e in window]
            out.steps.append(judge.step(action, texts))
            out.probe(trace, event, texts)
            judge.assistant(action)
        else:
            judge.source(source_of(event))
    for made in reply["summaries"]:
        tokens_in, tokens_out = estimator.count(made["prompt"]), estimator.count(made["summary"])
        if out.calls:
            at = min(made["before_call"], len(out.calls) - 1)
            call = out.calls[at]
            out.calls[at] = replace(call, summary_input=call.summary_input + tokens_in,
                                    summary_output=call.summary_output + tokens_out)  # fmt: skip
        out.summary_input_tokens += tokens_in
        out.summary_output_tokens += tokens_out
        out.passes["adk_compaction"] = out.passes.get("adk_compaction", 0) + 1
    return out


def available() -> bool:
    """Whether ADK's venv is there to run the worker in."""
    return Path(ADK_PYTHON).exists()
