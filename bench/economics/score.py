"""What a policy's runs over a set of traces come to: retention beside the bill per price model.

Retention is summed over every step of every trace (identifiers held ÷
used). Billed tokens are summed over every call of every trace, each
trace's calls priced with its own pinned overhead. Two summarizer columns:
at the agent model's price, and at the cheap model the policy's docs
summarize with (``cheap``). Each trace's own counts are kept too
(``per_trace``: identifiers used and held, billed per price model), so
that the noise between traces can be measured (``bench.economics.verdict``),
not only the pooled ratio.

``measure_policy`` runs one policy (a ``CompactionPolicy`` or its dict
form) over a split of τ-bench, or any traces, on a fresh server: the entry
point for measuring a new policy as the benchmark does.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.economics.measure import Replayed, as_policy, bench_server, replay_all
from bench.economics.pricing import PRICE_MODELS, PriceModel, bill
from bench.economics.probes import OUTCOMES
from bench.economics.recall import RecallRule
from bench.economics.retention import Retention
from bench.economics.traces import Trace, tau_airline
from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.model import Role


def score(
    traces: Sequence[Trace],
    runs: Sequence[Replayed],
    prices: Sequence[PriceModel] = PRICE_MODELS,
    cheap: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Retention, conversation tokens, passes and the bill per price model of ``runs``."""
    kept = Retention()
    passes: dict[str, int] = {}
    probes: dict[str, int] = {}
    for run in runs:
        kept += run.retention
        for strategy, n in run.passes.items():
            passes[strategy] = passes.get(strategy, 0) + n
        for found, n in run.probes.items():
            probes[found] = probes.get(found, 0) + n
    out: dict[str, Any] = {
        "traces": len(runs),
        "calls": sum(len(r.calls) for r in runs),
        "steps_using": kept.steps_using,
        "identifiers_used": kept.used,
        "identifiers_held": kept.held,
        "retention": kept.ratio,
        "conversation_tokens": sum(r.conversation_tokens for r in runs),
        "max_prompt_tokens": max(
            (
                t.overhead_tokens + c.window_tokens
                for t, r in zip(traces, runs, strict=True)
                for c in r.calls
            ),
            default=0,
        ),
        "summary_input_tokens": sum(r.summary_input_tokens for r in runs),
        "summary_output_tokens": sum(r.summary_output_tokens for r in runs),
        "failed_traces": sum(r.failed_at is not None for r in runs),
        "searches": sum(r.searches for r in runs),
        "recalled": sum(r.recalled for r in runs),
        "passes": passes,
        "probes": {found: probes.get(found, 0) for found in OUTCOMES} if probes else {},
        "prices": {},
        "per_trace": [
            {
                "trace": r.trace,
                "used": r.retention.used,
                "held": r.retention.held,
                "failed_at": r.failed_at,
                "billed": {},
            }
            for r in runs
        ],
    }
    for p in prices:
        billed = cached = prompt = summarizer = 0.0
        billed_cheap = 0.0
        for t, r, row in zip(traces, runs, out["per_trace"], strict=True):
            bills = bill(r.calls, p, t.overhead_tokens)
            row["billed"][p.name] = sum(b.billed for b in bills)
            billed += row["billed"][p.name]
            cached += sum(b.cached for b in bills)
            prompt += sum(b.prompt for b in bills)
            summarizer += sum(b.summarizer for b in bills)
            if cheap is not None:
                billed_cheap += sum(b.billed for b in bill(r.calls, p, t.overhead_tokens, cheap))
        out["prices"][p.name] = {
            "billed": billed,
            "billed_cheap_summarizer": billed_cheap if cheap is not None else billed,
            "summarizer": summarizer,
            "cache_hit_ratio": cached / prompt if prompt else 0.0,
        }
    return out


async def _replay_on_fresh_server(
    traces: Sequence[Trace], policy: CompactionPolicy | None, recall: RecallRule | None
) -> list[Replayed]:
    with tempfile.TemporaryDirectory(prefix="bench-measure-") as tmp:
        sidecar = await bench_server(Path(tmp) / "m.db")
        try:
            async with AsyncClient(f"127.0.0.1:{sidecar.port}", default_timeout=120.0) as c:
                return await replay_all(c, traces, policy, "measured", recall)
        finally:
            await sidecar.stop(0.5)


def measure_policy(
    policy: CompactionPolicy | Mapping[str, Any] | None,
    traces: Sequence[Trace] | None = None,
    *,
    split: str = "dev",
    prices: Sequence[PriceModel] = PRICE_MODELS,
    recall: RecallRule | None = None,
) -> dict[str, Any]:
    """Run one policy over ``traces`` (default: τ-bench airline ``split``, all 4 trials); with
    ``recall``, its agent searches by that rule (``bench.economics.recall``).

    Answers what ``score`` does: retention (identifiers held ÷ used, every
    step), the conversation tokens sent, and the bill per price model with
    the pinned system prompt and tools billed as each provider would. Choose
    settings on "dev"; report on "test".
    """
    chosen = list(traces) if traces is not None else tau_airline(split)
    runs = asyncio.run(_replay_on_fresh_server(chosen, as_policy(policy), recall))
    return score(chosen, runs, prices)


def pinned_bill(traces: Sequence[Trace], prices: Sequence[PriceModel]) -> dict[str, float]:
    """Per price model, the least the pinned system prompt and tools can be billed: written
    once (at the write premium, if any), then read from the cache on every later call, as if
    no minimum or TTL applied. No policy can cut this part."""
    out = {}
    for p in prices:
        total = 0.0
        for t in traces:
            calls = sum(e.role is Role.ASSISTANT for e in t.events)
            if calls:
                total += t.overhead_tokens * (max(1.0, p.write) + p.read * (calls - 1))
        out[p.name] = total
    return out
