"""Pins, for ``SessionCompactionMiddleware`` through a real ``create_agent`` graph (a fake chat
model that records its input) against a real server (``--summarizer extractive``,
``await_compaction=True``), the behaviours LangChain's ``SummarizationMiddleware`` tests pin
(triggers, retention by messages and by tokens, tool-pair safety, message ids), translated into
what the model receives, since our middleware never edits the state: "before_model returns
None" becomes "the model receives the state's messages unchanged", "[RemoveMessage(ALL),
summary, *preserved]" becomes "the model receives [<summary>, *preserved]" (our summary is a
user shadow prompt plus an assistant summary), and every run checks that the state still holds
every message; the settings translate as ("messages", N) trigger -> ``event_count`` N-1 (ours
fires above N-1 events, LangChain's at N messages), ("tokens", N) -> ``token_count`` at the
server's real token total of the messages (fires) or one above it (does not), a list of
conditions -> ``any_of``, a dict of conditions -> ``all_of``, ("messages", N) retention ->
``sliding_window`` ``max_events`` N (or ``summarize`` ``max_events_to_keep`` N), ("tokens", N)
retention -> ``token_budget``, and LangChain's "never cut inside an AI/Tool pair" -> boundary
``TOOL_PAIR`` (the policy default ``TURN`` is checked where it differs).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver

from sidecar.adapters.langchain import (
    SessionCompactionMiddleware,
    message_to_event,
)
from sidecar.client import Client
from sidecar.compaction.policy import CompactionPolicy, policy_from_dict
from sidecar.compaction.tokens import count_event
from sidecar.errors import InvalidConfig
from sidecar.model import Event, ToolResult
from sidecar.providers.conversation import orphan_text
from sidecar.summarizer.prompts import DEFAULT_SHADOW_PROMPT
from tests.adapters.chat_models import RecordingModel

SHADOW = DEFAULT_SHADOW_PROMPT.strip()
# Padding so that a summary pass is worth it (Summarize skips a pass that would archive no more
# than its shadow prompt plus max_summary_tokens); ``view`` strips it again.
PAD = " lorem ipsum dolor sit amet" * 6
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


# -- driving one agent run ----------------------------------------------------------------------


@dataclass
class Run:
    seen: list[BaseMessage]
    """What the model received on its one call (the agent's system prompt included)."""
    state: list[AnyMessage]
    """The graph state's messages after the run (the input, with ids, then the answer)."""
    log: list[Event]
    """The session's events in the service."""
    context: list[Event]
    """The session's active window (GetContext) after the run."""

    @property
    def conversation(self) -> list[BaseMessage]:
        """``seen`` without the agent's own system prompt."""
        if self.seen and isinstance(self.seen[0], SystemMessage) and self.seen[0].id is None:
            return self.seen[1:]
        return self.seen


async def run(
    address: str,
    messages: Sequence[BaseMessage],
    policy: CompactionPolicy | None,
    *,
    mode: str = "sync",
    system_prompt: str | None = None,
) -> Run:
    session = uuid.uuid4().hex
    model = RecordingModel()
    middleware = SessionCompactionMiddleware(
        address, policy=policy, session_id=session, await_compaction=True
    )
    agent = create_agent(
        model,
        [],
        system_prompt=system_prompt,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": session}}
    n = len(messages)
    inputs: Any = {"messages": list(messages)}
    if mode == "sync":
        agent.invoke(inputs, config)
        state = agent.get_state(config).values["messages"]
    else:
        await agent.ainvoke(inputs, config)
        state = (await agent.aget_state(config)).values["messages"]
    assert len(model.seen) == 1
    # Ours never edits the state: every input message is still there, in order, then the answer.
    assert [m.content for m in state[:n]] == [m.content for m in messages]
    assert len(state) == n + 1
    with Client(address) as client:
        log = list(client.session(f"langchain/{session}").events())
        context = list(client.session(f"langchain/{session}").context().events)
    return Run(seen=model.seen[0], state=state, log=log, context=context)


def text(message: BaseMessage) -> str:
    return str(message.content).removesuffix(PAD)


def view(messages: Sequence[BaseMessage]) -> list[str]:
    """Contents, with our summary pair shown as "<summary>"."""
    out: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if (
            isinstance(m, HumanMessage)
            and m.content == SHADOW
            and i + 1 < len(messages)
            and isinstance(messages[i + 1], AIMessage)
        ):
            out.append("<summary>")
            i += 2
            continue
        out.append(text(m))
        i += 1
    return out


def tokens(messages: Sequence[BaseMessage]) -> int:
    """The service's token total for these messages (tiktoken cl100k, as the server counts)."""
    total = 0
    for m in messages:
        event = message_to_event(m)
        assert event is not None
        total += count_event(event)
    return total


def h(content: str, pad: bool = False) -> HumanMessage:
    return HumanMessage(content=content + (PAD if pad else ""))


def ai_call(content: str, *ids: str) -> AIMessage:
    return AIMessage(
        content=content, tool_calls=[{"name": "tool", "args": {}, "id": i} for i in ids]
    )


def tool(content: str, call_id: str) -> ToolMessage:
    return ToolMessage(content=content, tool_call_id=call_id, name="tool")


def window(keep: int, boundary: str = "TOOL_PAIR", trigger: Any = None) -> CompactionPolicy:
    return policy_from_dict(
        {
            "trigger": trigger or {"always": True},
            "strategy": {"sliding_window": {"max_events": keep}, "boundary": boundary},
        }
    )


def summarize(keep: int, trigger: Any, boundary: str = "TOOL_PAIR") -> CompactionPolicy:
    return policy_from_dict(
        {
            "trigger": trigger,
            "strategy": {
                "summarize": {"max_events_to_keep": keep, "overlap": 0, "max_summary_tokens": 16},
                "boundary": boundary,
            },
        }
    )


def budget(max_tokens: int, boundary: str = "TOOL_PAIR") -> CompactionPolicy:
    return policy_from_dict(
        {
            "trigger": {"always": True},
            "strategy": {"token_budget": {"max_tokens": max_tokens}, "boundary": boundary},
        }
    )


def assert_pairs_whole(messages: Sequence[BaseMessage]) -> None:
    """Every ToolMessage the model sees follows the AIMessage that requested it."""
    requested: set[str | None] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            requested |= {c["id"] for c in m.tool_calls}
        if isinstance(m, ToolMessage):
            assert m.tool_call_id in requested, (m, messages)


def assert_same_ids(r: Run) -> None:
    """Every message the model sees has an id: the state's own, or the summary event's."""
    state_ids = [m.id for m in r.state]
    summary_ids = {e.id for e in r.log if e.synthetic}
    for m in r.conversation:
        assert m.id is not None, m
        assert m.id in state_ids or m.id in summary_ids, m
    kept = [m.id for m in r.conversation if m.id in state_ids]
    assert len(set(kept)) == len(kept)
    assert kept == [i for i in state_ids if i in set(kept)]  # state order


# == triggers ==================================================================================


@MODES
async def test_no_summarization_cases(sidecar_address: str, mode: str) -> None:
    """test_summarization_middleware_no_summarization_cases: trigger=None; below the threshold."""
    messages = [h("Hello"), AIMessage(content="Hi")]
    disabled = policy_from_dict(
        {"strategy": {"summarize": {"max_events_to_keep": 1, "overlap": 0}}}
    )
    r = await run(sidecar_address, messages, disabled, mode=mode)
    assert view(r.conversation) == ["Hello", "Hi"]
    assert_same_ids(r)

    messages = [h("Hello"), AIMessage(content="Hi")]
    below = summarize(1, {"token_count": tokens(messages) + 1})
    r = await run(sidecar_address, messages, below, mode=mode)
    assert view(r.conversation) == ["Hello", "Hi"]
    assert not any(e.synthetic for e in r.log)


async def test_token_trigger_threshold_is_inclusive(sidecar_address: str) -> None:
    """Calibration of the ("tokens", N) translation: the trigger fires at total >= threshold."""
    messages = [h(str(i), pad=True) for i in range(1, 6)]
    r = await run(sidecar_address, messages, summarize(2, {"token_count": tokens(messages)}))
    assert view(r.conversation) == ["<summary>", "4", "5"]


@MODES
async def test_full_workflow(sidecar_address: str, mode: str) -> None:
    """test_summarization_middleware_full_workflow[_async]: tokens over the trigger, keep 2."""
    messages = [h(str(i), pad=True) for i in range(1, 6)]
    r = await run(sidecar_address, messages, summarize(2, {"token_count": 1}), mode=mode)
    assert view(r.conversation) == ["<summary>", "4", "5"]
    assert isinstance(r.conversation[0], HumanMessage)
    summary = r.conversation[1]
    assert isinstance(summary, AIMessage)
    assert "User asked:" in str(summary.content)
    assert_same_ids(r)


@MODES
async def test_keep_messages(sidecar_address: str, mode: str) -> None:
    """test_summarization_middleware_keep_messages: trigger ("messages", 5), keep 2 messages."""
    trigger = {"event_count": 4}
    below = [h(str(i), pad=True) for i in range(1, 5)]
    r = await run(sidecar_address, below, summarize(2, trigger), mode=mode)
    assert view(r.conversation) == ["1", "2", "3", "4"]

    at = [h(str(i), pad=True) for i in range(1, 6)]
    r = await run(sidecar_address, at, summarize(2, trigger), mode=mode)
    assert view(r.conversation) == ["<summary>", "4", "5"]

    above = [h(str(i), pad=True) for i in range(1, 7)]
    r = await run(sidecar_address, above, summarize(2, trigger), mode=mode)
    assert view(r.conversation) == ["<summary>", "5", "6"]

    disabled = policy_from_dict(
        {"strategy": {"summarize": {"max_events_to_keep": 2, "overlap": 0}}}
    )
    r = await run(sidecar_address, [h(str(i), pad=True) for i in range(1, 7)], disabled, mode=mode)
    assert view(r.conversation) == ["1", "2", "3", "4", "5", "6"]


async def test_multiple_triggers_or(sidecar_address: str) -> None:
    """test_summarization_middleware_multiple_triggers: [("messages", 10), ("tokens", 500)]."""
    five = [h(str(i), pad=True) for i in range(5)]
    ten = [h(str(i), pad=True) for i in range(10)]
    low = {"token_count": tokens(ten) + 1}  # "mock_low_tokens": never reached here
    r = await run(sidecar_address, five, summarize(2, {"any_of": [{"event_count": 9}, low]}))
    assert view(r.conversation) == [str(i) for i in range(5)]

    r = await run(sidecar_address, ten, summarize(2, {"any_of": [{"event_count": 9}, low]}))
    assert view(r.conversation) == ["<summary>", "8", "9"]

    high = {"token_count": tokens(five)}  # "mock_high_tokens"
    five = [h(str(i), pad=True) for i in range(5)]
    r = await run(sidecar_address, five, summarize(2, {"any_of": [{"event_count": 9}, high]}))
    assert view(r.conversation) == ["<summary>", "3", "4"]


@MODES
async def test_and_trigger_conditions(sidecar_address: str, mode: str) -> None:
    """test_and_trigger_conditions[_async]: {"tokens": T, "messages": 5} -> all_of."""
    three = [h("1", pad=True), AIMessage(content="2" + PAD), h("3", pad=True)]
    high = {"token_count": tokens(three)}
    r = await run(
        sidecar_address, three, summarize(2, {"all_of": [high, {"event_count": 4}]}), mode=mode
    )
    assert view(r.conversation) == ["1", "2", "3"], "only the tokens condition is met"

    def six() -> list[AnyMessage]:
        return [
            h("1", pad=True) if i % 2 == 0 else AIMessage(content=f"{i + 1}{PAD}") for i in range(6)
        ]

    low = {"token_count": tokens(six()) + 1}
    r = await run(
        sidecar_address, six(), summarize(2, {"all_of": [low, {"event_count": 4}]}), mode=mode
    )
    assert len(view(r.conversation)) == 6, "only the messages condition is met"

    met = {"token_count": tokens(six())}
    r = await run(
        sidecar_address, six(), summarize(2, {"all_of": [met, {"event_count": 4}]}), mode=mode
    )
    assert view(r.conversation)[0] == "<summary>", "both conditions are met"
    assert len(view(r.conversation)) == 3


async def test_or_trigger_conditions_with_and_clauses(sidecar_address: str) -> None:
    """test_or_trigger_conditions_with_and_clauses:
    (tokens >= A and messages >= 3) or (tokens >= B and messages >= 6)."""

    def msgs(n: int, reps: int) -> list[AnyMessage]:
        return [h(f"{i}" + " lorem ipsum dolor sit amet" * reps) for i in range(n)]

    a = tokens(msgs(4, 6))  # the first clause's tokens, met by four long messages
    b = a // 2
    assert b <= tokens(msgs(7, 2)) < a
    assert b <= tokens(msgs(4, 3)) < a

    def policy() -> CompactionPolicy:
        return summarize(
            2,
            {
                "any_of": [
                    {"all_of": [{"token_count": a}, {"event_count": 2}]},
                    {"all_of": [{"token_count": b}, {"event_count": 5}]},
                ]
            },
        )

    r = await run(sidecar_address, msgs(4, 6), policy())
    assert view(r.conversation)[0] == "<summary>", "first OR clause met"
    r = await run(sidecar_address, msgs(7, 2), policy())
    assert view(r.conversation)[0] == "<summary>", "second OR clause met"
    r = await run(sidecar_address, msgs(4, 3), policy())
    assert len(view(r.conversation)) == 4, "no complete clause met"


@MODES
async def test_skips_when_no_safe_cutoff(sidecar_address: str, mode: str) -> None:
    """test_summarization_middleware_skips_when_no_safe_cutoff[_async]: one message, keep 1."""
    r = await run(
        sidecar_address,
        [h("Current request", pad=True)],
        summarize(1, {"token_count": 1}),
        mode=mode,
    )
    assert view(r.conversation) == ["Current request"]
    assert not any(e.synthetic for e in r.log)


@pytest.mark.parametrize(
    "trigger",
    [
        {"token_count": 0},  # ("tokens", 0)
        {"event_count": -5},  # ("messages", -5)
        {"invalid": 100},  # ("invalid", 100) / {"invalid_metric": 100}
        {"token_count": 1000.5},  # float for an integer metric
        {"event_count": "10"},  # numeric string
        {"event_count": True},  # bool
        {},  # trigger={} (empty AND clause)
        {"any_of": [{"token_count": 1000}, {}]},  # empty clause inside a list
        "foo",  # unsupported top-level type
    ],
)
def test_trigger_validation_errors(trigger: Any) -> None:
    """test_summarization_middleware_validation_edge_cases / test_trigger_validation_errors /
    test_empty_and_condition, as policy validation."""
    with pytest.raises(InvalidConfig):
        policy_from_dict({"trigger": trigger, "strategy": {"sliding_window": {}}})


# == retention (keep) ==========================================================================


def _four() -> list[AnyMessage]:
    # test_summarization_middleware_profile_inference_triggers_summary's state, 200 "tokens" each.
    pad = " word" * 200
    return [
        HumanMessage(content="Message 1" + pad),
        AIMessage(content="Message 2" + pad),
        HumanMessage(content="Message 3" + pad),
        AIMessage(content="Message 4" + pad),
    ]


def _stripped(r: Run) -> list[str]:
    return [str(m.content).split(" word")[0] for m in r.conversation]


async def test_token_keep_two_three_all(sidecar_address: str) -> None:
    """test_summarization_middleware_profile_inference_triggers_summary (the ("tokens", N) part):
    keep 400 -> last 2, keep 600 -> last 3, keep everything -> nothing summarized."""
    msgs = _four()
    per = [tokens([m]) for m in msgs]
    r = await run(sidecar_address, _four(), budget(per[2] + per[3]))
    assert _stripped(r) == ["Message 3", "Message 4"]
    r = await run(sidecar_address, _four(), budget(per[1] + per[2] + per[3]))
    assert _stripped(r) == ["Message 2", "Message 3", "Message 4"]
    r = await run(sidecar_address, _four(), budget(sum(per)))
    assert _stripped(r) == ["Message 1", "Message 2", "Message 3", "Message 4"]


async def test_token_keep_three_under_default_turn_boundary(sidecar_address: str) -> None:
    """Same, keep 600 under TURN (the policy default): the cut snaps forward to a user message."""
    per = [tokens([m]) for m in _four()]
    r = await run(sidecar_address, _four(), budget(per[1] + per[2] + per[3], boundary="TURN"))
    assert _stripped(r) == ["Message 3", "Message 4"]  # documented TURN behaviour, not LangChain's


@MODES
async def test_token_retention_preserves_ai_tool_pairs(sidecar_address: str, mode: str) -> None:
    """test_summarization_middleware_token_retention_preserves_ai_tool_pairs."""

    def msgs() -> list[AnyMessage]:
        return [
            HumanMessage(content="H" * 300),
            AIMessage(content="A" * 200, tool_calls=[{"name": "test", "args": {}, "id": "call-1"}]),
            ToolMessage(content="T" * 50, tool_call_id="call-1"),
            HumanMessage(content="H" * 180),
            HumanMessage(content="H" * 160),
        ]

    per = [tokens([m]) for m in msgs()]
    # The budget ends inside the pair: the tool result and both humans fit, the call does not.
    keep = per[2] + per[3] + per[4] + per[1] // 2
    r = await run(sidecar_address, msgs(), budget(keep), mode=mode)
    preserved = r.conversation
    assert [m.content for m in preserved] == [m.content for m in msgs()[1:]]
    assert isinstance(preserved[0], AIMessage)
    assert preserved[0].tool_calls
    assert isinstance(preserved[1], ToolMessage)
    assert preserved[1].tool_call_id == preserved[0].tool_calls[0]["id"]
    assert_same_ids(r)


async def test_cutoff_at_boundary(sidecar_address: str) -> None:
    """test_summarization_middleware_cutoff_at_boundary: keep 5 of 5, keep 10 of 5."""
    for keep in (5, 10):
        r = await run(sidecar_address, [h(str(i)) for i in range(5)], window(keep))
        assert view(r.conversation) == ["0", "1", "2", "3", "4"]


# == tool-call / ToolMessage pair safety =======================================================


def _five() -> list[AnyMessage]:
    return [
        h("msg1"),
        ai_call("ai", "call1"),
        tool("result1", "call1"),
        tool("result2", "call2"),  # orphan - no matching AI
        h("msg2"),
    ]


@pytest.mark.parametrize(
    ("cutoff", "expected"),
    [
        (0, 0),  # a non-ToolMessage returns the same index
        (1, 1),
        (2, 1),  # ToolMessage with a matching AIMessage moves back to include it
        (3, 4),  # orphan ToolMessage: advance past the ToolMessages
        (4, 4),
    ],
)
async def test_find_safe_cutoff_point(sidecar_address: str, cutoff: int, expected: int) -> None:
    """test_summarization_middleware_find_safe_cutoff_point: cutoff = len - keep."""
    msgs = _five()
    keep = len(msgs) - cutoff
    r = await run(sidecar_address, _five(), window(keep))
    # the orphan reaches the model as user text that says what it is, as the renderings have it
    orphan = orphan_text(ToolResult("call2", "tool", "result2"))
    assert view(r.conversation) == [
        orphan if text(m) == "result2" else text(m) for m in msgs[expected:]
    ]


async def test_find_safe_cutoff_point_orphan_tool(sidecar_address: str) -> None:
    """test_summarization_middleware_find_safe_cutoff_point_orphan_tool: cut 2 -> 3."""

    def msgs() -> list[AnyMessage]:
        return [
            h("msg1"),
            AIMessage(content="ai_no_tools"),
            tool("orphan_result", "orphan_call"),
            h("msg2"),
        ]

    r = await run(sidecar_address, msgs(), window(2))
    assert view(r.conversation) == ["msg2"]


async def test_cutoff_moves_backward_to_include_ai_message(sidecar_address: str) -> None:
    """test_summarization_cutoff_moves_backward_to_include_ai_message: cut 2 -> 1."""

    def msgs() -> list[AnyMessage]:
        return [
            h("initial question"),
            ai_call("I'll use a tool", "call_abc"),
            tool("search result", "call_abc"),
            h("followup"),
        ]

    r = await run(sidecar_address, msgs(), window(2))
    assert view(r.conversation) == ["I'll use a tool", "search result", "followup"]
    assert_pairs_whole(r.conversation)


def _parallel() -> list[AnyMessage]:
    ids = [f"call_{i}" for i in range(10)]
    return [
        h("calling 10 tools"),
        AIMessage(
            content="calling 10 tools",
            tool_calls=[{"name": f"tool_{i}", "args": {}, "id": c} for i, c in enumerate(ids)],
        ),
        *[ToolMessage(content=f"result_{i}", tool_call_id=c) for i, c in enumerate(ids)],
    ]


@pytest.mark.parametrize("cutoff", [0, 1, 2, 7, 11])
async def test_many_parallel_tool_calls_safety(sidecar_address: str, cutoff: int) -> None:
    """test_summarization_middleware_many_parallel_tool_calls_safety: any cut in 2..11 -> 1."""
    expected = 0 if cutoff == 0 else 1
    r = await run(sidecar_address, _parallel(), window(12 - cutoff))
    assert view(r.conversation) == [text(m) for m in _parallel()[expected:]]
    assert_pairs_whole(r.conversation)


@pytest.mark.parametrize("keep", [3, 2])
async def test_find_safe_cutoff_preserves_ai_tool_pair(sidecar_address: str, keep: int) -> None:
    """test_summarization_middleware_find_safe_cutoff_preserves_ai_tool_pair: keep 3/2 -> cut 1."""

    def msgs() -> list[AnyMessage]:
        return [
            h("msg1"),
            ai_call("ai", "call1", "call2", "call3"),
            tool("result1", "call1"),
            tool("result2", "call2"),
            tool("result3", "call3"),
            h("msg2"),
        ]

    r = await run(sidecar_address, msgs(), window(keep))
    assert view(r.conversation) == ["ai", "result1", "result2", "result3", "msg2"]


async def test_cutoff_at_start_of_tool_sequence(sidecar_address: str) -> None:
    """test_summarization_middleware_cutoff_at_start_of_tool_sequence: keep 4 -> cut 2."""

    def msgs() -> list[AnyMessage]:
        return [
            h("msg1"),
            h("msg2"),
            ai_call("ai", "call1"),
            tool("result", "call1"),
            h("msg3"),
            h("msg4"),
        ]

    r = await run(sidecar_address, msgs(), window(4))
    assert view(r.conversation) == ["ai", "result", "msg3", "msg4"]


@pytest.mark.parametrize("boundary", ["TURN", "TOOL_PAIR"])
async def test_pairs_never_split_under_either_boundary(sidecar_address: str, boundary: str) -> None:
    """The property behind all the cutoff tests, for every keep size and both boundaries."""
    for keep in range(1, 13):
        r = await run(sidecar_address, _parallel(), window(keep, boundary=boundary))
        assert_pairs_whole(r.conversation)
        assert r.conversation, keep


# == message ids ===============================================================================


async def test_message_ids_are_kept(sidecar_address: str) -> None:
    """test_summarization_middleware_helper_methods (``_ensure_message_ids``) + preserved ids:
    every message the model receives has an id, the state's own for kept messages."""
    msgs = [h(str(i), pad=True) for i in range(1, 6)]
    r = await run(sidecar_address, msgs, summarize(2, {"token_count": 1}))
    assert all(m.id for m in r.conversation)
    assert [m.id for m in r.conversation[2:]] == [m.id for m in r.state[3:5]]
    assert_same_ids(r)


# == the system prompt =========================================================================


async def test_system_prompt_first_then_summary(sidecar_address: str) -> None:
    """The agent's system prompt stays first; the summary follows it (ours: a pair)."""
    msgs = [h(str(i), pad=True) for i in range(1, 6)]
    r = await run(
        sidecar_address, msgs, summarize(2, {"token_count": 1}), system_prompt="You are helpful."
    )
    assert isinstance(r.seen[0], SystemMessage)
    assert r.seen[0].content == "You are helpful."
    assert view(r.seen) == ["You are helpful.", "<summary>", "4", "5"]
