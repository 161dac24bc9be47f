"""The LangChain middleware reports each model call's input tokens: the session calibrates.

A scripted chat model calls a tool for each question and answers its
result, and reports as ``usage_metadata["input_tokens"]`` three times the
tokens we estimated the window it was given at (read from the service as
the call is made). A report sent for any other version than the call's own
would not come out at exactly 3, so the factor checks the version too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from sidecar.adapters.langchain import SessionCompactionMiddleware
from sidecar.client import AsyncClient, Client, TokenCalibration
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.triggers import TokenCount
from tests.adapters.chat_models import RecordingModel
from tests.counting import exact_tokens

FACTOR = 3
CITIES = ["Oslo", "Lima", "Perth", "Quito", "Riga", "Cork"]


@tool
def get_weather(city: str) -> str:
    """Returns today's weather report for a city."""
    return f"{city}: sunny, 21 C, light wind from the west. " * 4


class ReportingModel(RecordingModel):
    """Calls ``get_weather`` for a question, answers its result; reports FACTOR times
    ``estimate()`` as the call's input tokens, or no usage without ``estimate``."""

    estimate: Callable[[], int] | None = None
    sizes: list[int] = Field(default_factory=list)

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        self.seen.append(list(messages))
        self.sizes.append(len(messages))
        usage = None
        if self.estimate is not None:
            tokens = FACTOR * self.estimate()
            usage = UsageMetadata(input_tokens=tokens, output_tokens=5, total_tokens=tokens + 5)
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="Sunny, 21 C.", usage_metadata=usage)
        else:
            city = str(messages[-1].content).rsplit(" ", 1)[-1].rstrip("?")
            call = {"id": f"call-{len(self.seen)}", "name": "get_weather", "args": {"city": city}}
            reply = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def question(turn: int) -> Any:  # the graph's input state
    text = f"Turn {turn}: what is the weather in {CITIES[turn % len(CITIES)]}?"
    return {"messages": [HumanMessage(content=text)]}


def window_tokens(client: Client, key: str) -> Callable[[], int]:
    return lambda: exact_tokens(client.session(key).context())


def agent_of(model: ReportingModel, middleware: SessionCompactionMiddleware, saver: Any) -> Any:
    return create_agent(model, [get_weather], middleware=[middleware], checkpointer=saver)


def test_every_model_call_calibrates_the_session(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        model = ReportingModel(estimate=window_tokens(client, "langchain/calls"))
        agent = agent_of(model, SessionCompactionMiddleware(client, session_id="calls"), None)
        config: Any = {"configurable": {"thread_id": "calls"}}
        for turn in range(3):
            agent.invoke(question(turn), config)

        # Each run's last call too: its answer is mirrored, with its usage, as the run ends.
        assert len(model.seen) == 6
        calibrated = client.get_session("langchain/calls").calibration
        assert calibrated.samples == len(model.seen)
        assert calibrated.factor == pytest.approx(FACTOR)


def test_a_restarted_middleware_counts_no_call_twice(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        model = ReportingModel(estimate=window_tokens(client, "langchain/restart"))
        saver = InMemorySaver()
        config: Any = {"configurable": {"thread_id": "restart"}}
        agent = agent_of(model, SessionCompactionMiddleware(client, session_id="restart"), saver)
        for turn in range(2):
            agent.invoke(question(turn), config)
        # A fresh middleware (a restarted process) re-sends the whole state, every answer with
        # its usage metadata: only the calls it made itself are reported.
        again = SessionCompactionMiddleware(client, session_id="restart")
        agent_of(model, again, saver).invoke(question(2), config)

        calibrated = client.get_session("langchain/restart").calibration
        assert calibrated.samples == len(model.seen) == 6
        assert calibrated.factor == pytest.approx(FACTOR)


class Prepending(AgentMiddleware):
    """A middleware before ours that hands the model one more message first."""

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> Any:
        note = HumanMessage(content="Context: answer briefly.", id="note")
        return handler(request.override(messages=[note, *request.messages]))


def test_a_run_without_a_thread_calibrates_its_own_session(sidecar_address: str) -> None:
    """No ``thread_id``: the run's session is named by the state's first message, also when a
    middleware before ours changes the messages the model gets (the reports went astray)."""
    with Client(sidecar_address) as client:
        key = "langchain/run-q-1"
        model = ReportingModel(estimate=window_tokens(client, key))
        middleware = SessionCompactionMiddleware(client)
        agent = create_agent(model, [get_weather], middleware=[Prepending(), middleware])
        asked = HumanMessage(content="Turn 0: what is the weather in Oslo?", id="q-1")
        agent.invoke({"messages": [asked]})
        calibrated = client.get_session(key).calibration
        assert calibrated.samples == len(model.seen) == 2
        assert calibrated.factor == pytest.approx(FACTOR)


async def compacted_run(
    address: str, session_id: str, threshold: int | None, reports: bool
) -> ReportingModel:
    """An async agent's conversation on a session compacted at ``threshold`` tokens."""
    key = f"langchain/{session_id}"
    with Client(address) as blocking:
        model = ReportingModel(estimate=window_tokens(blocking, key) if reports else None)
        policy = None
        if threshold is not None:
            policy = CompactionPolicy(trigger=TokenCount(threshold), strategy=SlidingWindow(2))
        async with AsyncClient(address) as client:
            middleware = SessionCompactionMiddleware(client, policy=policy, session_id=session_id)
            agent = agent_of(model, middleware, InMemorySaver())
            config: Any = {"configurable": {"thread_id": session_id}}
            for turn in range(len(CITIES)):
                await agent.ainvoke(question(turn), config)
    return model


async def test_a_token_trigger_fires_on_the_calibrated_count(sidecar_address: str) -> None:
    async with AsyncClient(sidecar_address) as client:
        await compacted_run(sidecar_address, "measure", None, reports=False)
        # Uncalibrated, the window never reaches the threshold: it holds at most these tokens.
        threshold = exact_tokens(await client.session("langchain/measure").context()) + 1

        plain = await compacted_run(sidecar_address, "plain", threshold, reports=False)
        session = await client.get_session("langchain/plain")
        assert not session.last_compaction_id
        assert session.calibration == TokenCalibration(1.0, 0)
        assert plain.sizes == sorted(plain.sizes)

        reported = await compacted_run(sidecar_address, "calibrated", threshold, reports=True)
        session = await client.get_session("langchain/calibrated")
        assert session.last_compaction_id
        # A later call was given fewer messages than the one before it: the compaction landed
        # mid-conversation, on calibrated tokens, and each report named its call's window.
        assert reported.sizes != sorted(reported.sizes)
        assert session.calibration.samples == len(reported.seen)
        assert session.calibration.factor == pytest.approx(FACTOR)
