"""Google ADK: a ``FunctionTool`` with which the agent recalls what compaction moved out.

The tool searches the session the agent is running in — found from the
``ToolContext``, named as ``CompactionSessionService`` (or, with
``namespace="adk-mirror"``, ``CompactingModelCallback``) names it — for the
model's words, and returns the best archived hits as compact text (see
``sidecar.adapters.recall``).
"""

from __future__ import annotations

from typing import Any

from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext

from sidecar.adapters.adk_mapping import session_key
from sidecar.adapters.clients import LoopClients
from sidecar.adapters.recall import (
    DEFAULT_MAX_HITS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TIMEOUT_S,
    TOOL_DESCRIPTION,
    RecallSettings,
    arecall,
)
from sidecar.client import AsyncClient

__all__ = ["recall_tool"]


def recall_tool(
    target: AsyncClient | str,
    *,
    namespace: str = "adk",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_hits: int = DEFAULT_MAX_HITS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    include_active: bool = False,
    **client_options: Any,
) -> FunctionTool:
    """A tool named ``recall`` that searches the current session's archived history.

    Add it to the agent's ``tools``. The model calls it with a ``query`` (a
    few words, all of which must match); the answer holds the best hits,
    each with its role, time and a snippet with the terms marked, in at most
    ``max_tokens`` tokens (the service's estimator), and says how many more
    matched. The search has a ``timeout_s`` deadline; a refused query or a
    timeout is answered with a sentence, not raised.

    ``target`` is an ``AsyncClient`` or an address (then one client per event
    loop, with ``client_options``). ``namespace`` is the one the session
    service was given: ``"adk"`` for ``CompactionSessionService``'s default,
    ``"adk-mirror"`` for ``CompactingModelCallback``'s.
    """
    clients = LoopClients(target, client_options)
    settings = RecallSettings(
        max_tokens=max_tokens, max_hits=max_hits, timeout_s=timeout_s, include_active=include_active
    )

    async def recall(query: str, tool_context: ToolContext) -> str:
        session = tool_context.session
        key = session_key(namespace, session.app_name, session.user_id, session.id)
        return await arecall(clients.get(), key, query, settings)

    recall.__doc__ = TOOL_DESCRIPTION
    return FunctionTool(recall)
