"""How deep a pass should be: token_budget at several trigger and budget pairs, one transcript.

The same trigger and strategy at different water marks: a high-water
trigger with a low-water budget (rare, deep passes), against a trigger
close to the budget (frequent, shallow ones) and against a trigger near
the window. Each pair is replayed and priced as the main run's policies
are; the README's guidance quotes these figures.
"""

from __future__ import annotations

from typing import Any

from bench.economics.policies import Entry
from bench.economics.pricing import PRICE_MODELS, bill
from bench.economics.replay import replay
from bench.economics.transcripts import Transcript
from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount

SWEEP_TRANSCRIPT = "ops"
MARKS = ((0.5, 0.4), (0.5, 0.03), (0.15, 0.12), (0.15, 0.03), (0.06, 0.03))
"""(trigger, budget) as fractions of the model's window."""


async def depth_sweep(client: AsyncClient, t: Transcript) -> list[dict[str, Any]]:
    """Each (trigger, budget) pair's passes, cache-hit ratio and bill per price model."""
    rows = []
    for high, low in MARKS:
        policy = CompactionPolicy(
            TokenCount(int(t.window_tokens * high)),
            TokenBudget(max_tokens=int(t.window_tokens * low)),
        )
        name = f"sweep-{high:g}-{low:g}"
        done = await replay(client, f"{t.name}-{name}", t, Entry(name, "ours", policy))
        row: dict[str, Any] = {"high": high, "low": low, "passes": sum(done.passes.values())}
        for prices in PRICE_MODELS:
            bills = bill(done.calls, prices, t.overhead_tokens)
            prompt = sum(b.prompt for b in bills)
            row[prices.name] = {
                "billed": sum(b.billed for b in bills),
                "cache_hit_ratio": sum(b.cached for b in bills) / prompt if prompt else 0.0,
            }
        rows.append(row)
    return rows
