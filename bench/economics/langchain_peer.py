"""LangChain's own compaction, run for real: ``create_agent`` with its middleware, a trace replayed.

The agent model is a scripted chat model: each call records the messages
it was really sent (the request a provider would bill, the context the
judge checks) and answers with the trace's next assistant message. The
tools answer with the trace's recorded results, in order. Each user message
of the trace is one ``invoke`` on one thread (``InMemorySaver``).

- ``langchain_summarization``: ``SummarizationMiddleware`` as its docs
  configure it (``trigger=("tokens", 4000)``, ``keep=("messages", 20)``,
  LangChain's own approximate token counter, the summarizer's input trimmed
  to 4,000 tokens). The summarizer is deterministic: the same extraction
  as our extractive summarizer (the user's messages verbatim, the tool
  names, the last three assistant texts) at the length every fake summary
  has (``bench.economics.summary_size``: the messages it is sent over the
  ratio, at most ``PEER_CAP``); its input is billed as the prompt LangChain
  would send a model (its own summary prompt around the trimmed messages),
  its output as the summary.
- ``langchain_clear``: ``ContextEditingMiddleware(edits=[ClearToolUsesEdit()])``
  with its defaults (trigger 100,000 tokens, keep 3), re-applied to the
  state's messages before every call, as LangChain does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    get_buffer_string,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, ConfigDict, Field

from bench.economics.fake_summarizer import sized
from bench.economics.measure import Replayed, action_of, source_of
from bench.economics.policies import PEER_TOKENS
from bench.economics.pricing import Call
from bench.economics.retention import Judge
from bench.economics.summary_size import PEER_CAP, RATIO
from bench.economics.traces import Trace
from sidecar.compaction.formatting import format_event
from sidecar.compaction.tokens import count_event
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.tokenizer import TiktokenEstimator

PEERS = ("langchain_summarization", "langchain_clear")


class _AnyArgs(BaseModel):
    model_config = ConfigDict(extra="allow")


def as_event(message: BaseMessage, arguments: dict[str, str]) -> Event:
    """A message as our event (so it is rendered and counted as the server counts events);
    tool calls keep the trace's own argument text (``arguments``, by call id)."""
    text = message.content if isinstance(message.content, str) else str(message.content)
    if isinstance(message, ToolMessage):
        result = ToolResult(message.tool_call_id, message.name or "", text)
        return Event(id=str(message.id), role=Role.TOOL, tool_results=(result,))
    if isinstance(message, AIMessage):
        calls = tuple(
            ToolCall(str(c["id"]), c["name"], arguments.get(str(c["id"]), json.dumps(c["args"])))
            for c in message.tool_calls
        )
        return Event(id=str(message.id), role=Role.ASSISTANT, text=text, tool_calls=calls)
    return Event(id=str(message.id), role=Role.USER, text=text)


class ScriptedModel(BaseChatModel):
    """Answers each call with the next scripted message; records what each call was sent."""

    script: list[AIMessage] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if not self.script:  # the trace's turn ended on a tool result: stop the loop
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=""))])
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])


def _ai(event: Event) -> AIMessage:
    calls = [
        {"id": c.id, "name": c.name, "args": json.loads(c.arguments_json or "{}")}
        for c in event.tool_calls
    ]
    return AIMessage(content=event.text, tool_calls=calls, id=event.id)


def _extract(messages: Sequence[BaseMessage], ratio: float = RATIO) -> str:
    """The extractive summarizer's rule over LangChain messages, at the calibrated length for
    the messages as LangChain's prompt renders them (``summary_size``)."""
    asked = [str(m.content) for m in messages if isinstance(m, HumanMessage)]
    tools = sorted({c["name"] for m in messages for c in getattr(m, "tool_calls", None) or []})
    answers = [str(m.content) for m in messages if isinstance(m, AIMessage) and m.content][-3:]
    text = (
        "## User requests\n" + "\n".join(asked) + "\n## Tools used\n" + ", ".join(tools)
        + "\n## Latest findings\n" + "\n".join(answers)
    )  # fmt: skip
    read = TiktokenEstimator().count(get_buffer_string(messages, format="xml"))
    return sized(text, read, PEER_CAP, ratio)


def replay_langchain(trace: Trace, peer: str, ratio: float = RATIO) -> Replayed:
    """Replay ``trace`` through ``create_agent`` with ``peer``'s middleware (one of PEERS);
    its summaries at the length ``ratio`` gives (``summary_size``)."""
    estimator = TiktokenEstimator()
    model = ScriptedModel()
    summaries: list[tuple[int, int, int]] = []  # (next call, input, output) of each summary
    middleware: list[Any]
    if peer == "langchain_summarization":
        holder: list[SummarizationMiddleware] = []

        def summarize(messages: list[AnyMessage]) -> str:
            prompt = holder[0]._format_summary_prompt(messages)  # what a model would be sent
            summary = _extract(messages, ratio)
            tokens = (estimator.count(str(prompt)), estimator.count(summary))
            summaries.append((len(model.seen), *tokens))
            return summary

        summarizing = SummarizationMiddleware(
            model=model,
            trigger=("tokens", PEER_TOKENS),
            keep=("messages", 20),
            summarizer=summarize,
        )
        holder.append(summarizing)
        middleware = [summarizing]
    elif peer == "langchain_clear":
        middleware = [ContextEditingMiddleware(edits=[ClearToolUsesEdit()])]
    else:
        raise ValueError(f"unknown LangChain peer {peer!r}")
    arguments = {c.id: c.arguments_json for e in trace.events for c in e.tool_calls}
    outputs: dict[str, list[str]] = {}
    for e in trace.events:
        for r in e.tool_results:
            outputs.setdefault(r.name, []).append(r.content)

    def tool(name: str) -> StructuredTool:
        return StructuredTool.from_function(
            func=lambda **_: outputs[name].pop(0),
            name=name,
            description=f"the trace's {name}",
            args_schema=_AnyArgs,
        )

    agent = create_agent(
        model,
        [tool(n) for n in outputs],
        system_prompt=trace.system or None,
        middleware=middleware,
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": trace.name}, "recursion_limit": 10_000}
    turns: list[tuple[Event, list[Event]]] = []
    for e in trace.events:
        if e.role is Role.USER:
            turns.append((e, []))
        elif turns:
            turns[-1][1].append(e)
    judge = Judge()
    judge.system(f"{trace.system} {trace.tools}")
    out = Replayed(trace.name)
    clock = 0.0
    for user, rest in turns:
        judge.source(source_of(user))
        model.script = [_ai(e) for e in rest if e.role is Role.ASSISTANT]
        before = len(model.seen)
        agent.invoke({"messages": [HumanMessage(user.text, id=user.id)]}, config)
        assistants = [e for e in rest if e.role is Role.ASSISTANT]
        for sent, event in zip(model.seen[before:], assistants, strict=False):
            window = [as_event(m, arguments) for m in sent if m.type != "system"]
            texts = [format_event(e) for e in window]
            keys = tuple((e.id, False, count_event(e)) for e in window)
            out.calls.append(Call(clock, keys))
            clock += trace.call_gap_s
            action = action_of(event)
            out.steps.append(judge.step(action, texts))
            out.probe(trace, event, texts)
            judge.assistant(action)
            # The tool results the agent appended after this call are sources for the next.
            for after in rest[rest.index(event) + 1 :]:
                if after.role is not Role.TOOL:
                    break
                judge.source(source_of(after))
    for index, tokens_in, tokens_out in summaries:
        # A summary is made before the model call it lands in (the calls are the model's).
        if out.calls:
            at = min(index, len(out.calls) - 1)
            call = out.calls[at]
            out.calls[at] = replace(
                call,
                summary_input=call.summary_input + tokens_in,
                summary_output=call.summary_output + tokens_out,
            )
        out.summary_input_tokens += tokens_in
        out.summary_output_tokens += tokens_out
        out.passes["summarization"] = out.passes.get("summarization", 0) + 1
    return out
