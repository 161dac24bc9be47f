"""ADK's own compaction, run for real in ADK's venv: ``python -m bench.economics.adk_peer_worker``.

One command (``bench.json_lines``): ``replay(trace, config)`` runs a trace
through an ``App(events_compaction_config=EventsCompactionConfig(...))`` and
a ``Runner`` over ``InMemorySessionService``, each user message one
``run_async``. The agent model is scripted: each call records the contents
ADK really sent it and answers with the trace's next assistant message,
reporting a prompt token count (characters ÷ 4, system prompt included, as
ADK's token trigger reads ``usage_metadata``). Tools answer with the trace's
recorded results. The summarizer is ADK's ``LlmEventSummarizer`` around a
deterministic model: its summary is the extractive rule (the user's lines,
the tool names, the last three agent lines) at the length every fake
summary has (``bench.economics.summary_size``, in characters: the
conversation ADK renders into its prompt over ``ratio``, at most
``PEER_CAP`` tokens). Standard library and ADK only; the parent counts
tokens and judges.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

from bench.economics.summary_size import (
    CHARS_PER_TOKEN,
    FLOOR,
    PEER_CAP,
    RATIO,
    cut_chars,
    fit,
    target_size,
)
from bench.json_lines import serve


def _usage(chars: int) -> types.GenerateContentResponseUsageMetadata:
    return types.GenerateContentResponseUsageMetadata(prompt_token_count=chars // 4)


def _contents(request: LlmRequest) -> list[dict[str, Any]]:
    out = []
    for content in request.contents:
        parts: list[dict[str, Any]] = []
        for part in content.parts or []:
            if part.text:
                parts.append({"text": part.text})
            if part.function_call:
                call = part.function_call
                parts.append({"call": {"id": call.id, "name": call.name, "args": call.args}})
            if part.function_response:
                r = part.function_response
                parts.append({"result": {"id": r.id, "name": r.name, "response": r.response}})
        out.append({"role": content.role, "parts": parts})
    return out


class ScriptedLlm(BaseLlm):
    """Answers each call with the next scripted message, recording what it was sent."""

    script: list[dict[str, Any]] = Field(default_factory=list)
    seen: list[list[dict[str, Any]]] = Field(default_factory=list)
    system_chars: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        sent = _contents(llm_request)
        chars = self.system_chars + len(str(sent))
        if not self.script:  # the trace's turn ended on a tool result: stop
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="")]),
                              usage_metadata=_usage(chars))  # fmt: skip
            return
        self.seen.append(sent)
        step = self.script.pop(0)
        parts = [types.Part(text=step["text"])] if step["text"] else []
        parts += [
            types.Part(function_call=types.FunctionCall(id=c["id"], name=c["name"], args=c["args"]))
            for c in step["calls"]
        ]
        yield LlmResponse(content=types.Content(role="model", parts=parts),
                          usage_metadata=_usage(chars))  # fmt: skip


class ExtractiveLlm(BaseLlm):
    """The summarizer's model: the extractive rule over ADK's own summary prompt."""

    calls: list[dict[str, Any]] = Field(default_factory=list)
    ratio: float = RATIO

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        prompt = "".join(p.text or "" for c in llm_request.contents for p in c.parts or [])
        lines = prompt.split("\n")
        asked = [line for line in lines if line.startswith("user: ")]
        tools = sorted(set(re.findall(r"called tool: (\w+)\(", prompt)))
        answers = [line for line in lines if re.match(r"^\w+: ", line) and not
                   line.startswith("user: ")][-3:]  # fmt: skip
        summary = "\n".join(["User requests:", *asked, "Tools: " + ", ".join(tools), *answers])
        # What ADK renders of the events: its prompt less its own instruction.
        template = LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE
        read = len(prompt) - len(template.format(conversation_history=""))
        size = target_size(read, PEER_CAP * CHARS_PER_TOKEN, self.ratio, FLOOR * CHARS_PER_TOKEN)
        summary = fit(summary, size, len, cut_chars)
        self.calls.append({"prompt": prompt, "summary": summary})
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=summary)]))


class RecordedTool(BaseTool):
    """A tool answering with the trace's recorded results for its name, in order."""

    def __init__(self, name: str, outputs: list[str]) -> None:
        super().__init__(name=name, description=f"the trace's {name}")
        self.outputs = outputs

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters=types.Schema(type=types.Type.OBJECT),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return {"result": self.outputs.pop(0) if self.outputs else ""}


class Worker:
    async def close(self) -> None:
        return None

    async def replay(
        self, trace: dict[str, Any], config: dict[str, Any], ratio: float = RATIO
    ) -> dict[str, Any]:
        model = ScriptedLlm(model="scripted", script=[], seen=[], system_chars=len(trace["system"]))
        summarizer_model = ExtractiveLlm(model="extractive", calls=[], ratio=ratio)
        outputs: dict[str, list[str]] = {}
        for e in trace["events"]:
            for r in e["results"]:
                outputs.setdefault(r["name"], []).append(r["content"])
        agent = LlmAgent(
            name="agent",
            model=model,
            instruction=trace["system"].replace("{", "{{").replace("}", "}}"),
            tools=[RecordedTool(n, o) for n, o in outputs.items()],
        )
        compaction = EventsCompactionConfig(
            summarizer=LlmEventSummarizer(llm=summarizer_model), **config
        )
        app = App(name="bench", root_agent=agent, events_compaction_config=compaction)
        sessions = InMemorySessionService()
        runner = Runner(app=app, session_service=sessions)
        await sessions.create_session(app_name="bench", user_id="u", session_id="s")
        calls: list[dict[str, Any]] = []  # per model call: the contents it was sent
        turns: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        for e in trace["events"]:
            if e["role"] == "user":
                turns.append((e, []))
            elif turns and e["role"] == "assistant":
                turns[-1][1].append(e)
        for user, steps in turns:
            model.script[:] = [{"text": s["text"], "calls": s["calls"]} for s in steps]
            message = types.Content(role="user", parts=[types.Part(text=user["text"])])
            async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
                pass
            while len(calls) < len(model.seen):
                calls.append({"sent": model.seen[len(calls)]})
            for made in summarizer_model.calls:
                # ADK compacts after an invocation: the summary lands before the next call.
                made.setdefault("before_call", len(calls))
        return {"calls": calls, "summaries": summarizer_model.calls}


if __name__ == "__main__":
    asyncio.run(serve(Worker()))
