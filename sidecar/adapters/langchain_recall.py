"""LangChain v1: a tool with which the agent recalls what compaction moved out.

The tool searches the session that ``SessionCompactionMiddleware`` mirrors
the run into, through the middleware's own client: the middleware's ``key``
names it from the tool's ``ToolRuntime`` as from its hooks' ``Runtime`` (by
default the run's ``thread_id``; a fixed ``session_id`` or a function of the
runtime alike), so the tool and the middleware cannot disagree. It returns
the best archived hits as compact text (see ``sidecar.adapters.recall``).
"""

from __future__ import annotations

from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import Runtime

from sidecar.adapters.langchain import SessionCompactionMiddleware
from sidecar.adapters.recall import (
    DEFAULT_MAX_HITS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT_S,
    TOOL_DESCRIPTION,
    RecallSettings,
    arecall,
    recall,
)

__all__ = ["recall_tool"]


def recall_tool(
    middleware: SessionCompactionMiddleware,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_hits: int = DEFAULT_MAX_HITS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    include_active: bool = False,
) -> BaseTool:
    """A tool named ``recall`` that searches the archived history of ``middleware``'s session.

    Give it to ``create_agent`` beside the middleware it names. The model
    calls it with a ``query`` (a few words, all of which must match); the
    answer holds the best hits, each with its role, time and a snippet with
    the terms marked, in at most ``max_tokens`` tokens (the service's
    estimator), and says how many more matched. The search has a
    ``timeout_s`` deadline; a refused query or a timeout is answered with a
    sentence, not raised. Sync agents use the middleware's ``Client``, async
    agents its ``AsyncClient``, as the middleware itself does.
    """
    settings = RecallSettings(
        max_tokens=max_tokens, max_hits=max_hits, timeout_s=timeout_s, include_active=include_active
    )

    def search(query: str, runtime: ToolRuntime) -> str:
        key = middleware.key(_graph_runtime(runtime), runtime.state.get("messages", ()))
        return recall(middleware.sync_client(), key, query, settings)

    async def asearch(query: str, runtime: ToolRuntime) -> str:
        key = middleware.key(_graph_runtime(runtime), runtime.state.get("messages", ()))
        return await arecall(middleware.async_client(), key, query, settings)

    return StructuredTool.from_function(
        func=search, coroutine=asearch, name="recall", description=TOOL_DESCRIPTION
    )


def _graph_runtime(runtime: ToolRuntime) -> Runtime[Any]:
    """The graph's ``Runtime`` as the middleware's hooks get it, from the tool's runtime."""
    return Runtime(
        context=runtime.context,
        store=runtime.store,
        stream_writer=runtime.stream_writer,
        execution_info=runtime.execution_info,
        server_info=runtime.server_info,
    )
