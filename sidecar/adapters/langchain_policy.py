"""LangChain's context-editing settings as session policies.

``clear_tool_uses_policy`` is LangChain's ``ContextEditingMiddleware(
ClearToolUsesEdit(...))`` as a session policy, optionally followed by a
summary, the way ``SummarizationMiddleware`` would run after it. It needs no
LangChain import: ``policy_from_clear_tool_uses_edit`` reads the edit's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import TokenCount


def clear_tool_uses_policy(
    *,
    trigger: int = 100_000,
    clear_at_least: int = 0,
    keep: int = 3,
    clear_tool_inputs: bool = False,
    exclude_tools: Sequence[str] = (),
    placeholder: str = "[cleared]",
    then_summarize: Summarize | None = None,
    keep_reasoning_turns: int | None = None,
) -> CompactionPolicy:
    """LangChain's ``ClearToolUsesEdit`` settings (its defaults too) as a session policy.

    At ``trigger`` tokens the results of all but the newest ``keep`` tool
    uses become ``placeholder`` (``{name}`` and ``{call_id}`` may name the
    call), unless that frees fewer than ``clear_at_least`` tokens. Unlike the
    middleware's edit, which rewrites the request each call, the clearing is
    stored: the state and the session's log keep the originals, search finds
    them, and the provider's cached prefix changes only when a pass lands.
    With ``then_summarize`` the policy is a pipeline: the summary runs only if
    the window is still at ``trigger`` once cleared. ``keep_reasoning_turns``
    (beyond LangChain) also clears the reasoning text of older turns, their
    signatures kept.
    """
    clear = ClearToolResults(
        keep_tool_uses=keep,
        exclude_tools=tuple(exclude_tools),
        clear_tool_inputs=clear_tool_inputs,
        min_cleared_tokens=clear_at_least,
        placeholder=placeholder,
        keep_reasoning_turns=keep_reasoning_turns,
    )
    strategy = clear if then_summarize is None else Pipeline((clear, then_summarize))
    return CompactionPolicy(trigger=TokenCount(trigger), strategy=strategy)


def policy_from_clear_tool_uses_edit(
    edit: Any, *, then_summarize: Summarize | None = None
) -> CompactionPolicy:
    """``clear_tool_uses_policy`` from a LangChain ``ClearToolUsesEdit``."""
    return clear_tool_uses_policy(
        trigger=edit.trigger,
        clear_at_least=edit.clear_at_least,
        keep=edit.keep,
        clear_tool_inputs=edit.clear_tool_inputs,
        exclude_tools=tuple(edit.exclude_tools),
        placeholder=edit.placeholder,
        then_summarize=then_summarize,
    )
