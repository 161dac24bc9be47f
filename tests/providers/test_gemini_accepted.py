"""Gemini: the rules its API enforces beyond what google-genai's types check.

Function responses stand in a content of their own, in call order; every
rendering is strict JSON; an error stays an error; and in the current turn
a step's first call always carries a signature (Google's documented bypass
value when the call was never signed).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest

from sidecar.engine.validation import Limits, check_events
from sidecar.errors import InvalidArgument
from sidecar.model import Event, Role
from sidecar.providers.fragments import Fragments
from sidecar.providers.gemini import SKIP_SIGNATURE
from sidecar.providers.render import ContextFormat, render, render_json
from sidecar.providers.wire import PROVIDER_KEY
from tests.providers import sdk
from tests.providers.builders import PNG, a, call, result, t, thought, u


def contents(events: Sequence[Event]) -> list[Any]:
    body = render(events, ContextFormat.GEMINI)
    sdk.gemini(body)
    value = body["contents"]
    assert isinstance(value, list)
    return value


def _responses_stand_alone(out: list[Any]) -> list[list[str]]:
    """Every content with a function response holds function responses only; their ids."""
    found = []
    for content in out:
        kinds = ["functionResponse" in p for p in content["parts"]]
        if any(kinds):
            assert all(kinds), content
            assert content["role"] == "user"
            found.append([p["functionResponse"]["id"] for p in content["parts"]])
    return found


def test_a_tool_events_text_and_image_are_not_in_the_function_responses_content() -> None:
    tool = Event(
        "t1",
        Role.TOOL,
        "chart attached",
        tool_results=(result("c1"), result("c2")),
        parts=(PNG,),
    )
    out = contents([u(), a(calls=[call("c1"), call("c2")]), tool, u("thanks")])
    assert _responses_stand_alone(out) == [["c1", "c2"]]
    texts = [p.get("text") for c in out for p in c["parts"]]
    assert "chart attached" in texts


def test_a_slow_result_after_a_later_user_message_has_a_content_of_its_own() -> None:
    events = [
        u("look"),
        a(calls=[call("c1"), call("c2")]),
        u("hurry"),
        t(result("c2"), result("c1")),
    ]
    out = contents(events)
    assert _responses_stand_alone(out) == [["c1", "c2"]]
    assert [c["role"] for c in out] == ["user", "model", "user", "user"]
    assert out[3]["parts"] == [{"text": "hurry"}]


def test_a_pending_calls_placeholder_is_not_merged_with_the_user_text_after_it() -> None:
    out = contents([u(), a(calls=[call("c1")]), u("never mind")])
    assert _responses_stand_alone(out) == [["c1"]]
    assert out[-1]["parts"] == [{"text": "never mind"}]


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in a rendering")

    text.encode("utf-8")  # no lone surrogate: the answer can be sent
    return json.loads(text, parse_constant=refuse)


HOSTILE = [
    '{"s": "\\ud83d"}',
    "[" * 3000 + "]" * 3000,
    '{"d": ' + '{"d": ' * 2999 + "1" + "}" * 3000,
    '{"a": NaN}',
    '{"a": 1e999}',
    "[-1e999]",
    '{"a": Infinity}',
]


def test_every_rendering_is_strict_json_whatever_the_results_hold() -> None:
    calls = [call(f"c{i}") for i in range(len(HOSTILE))]
    results = [result(f"c{i}", content) for i, content in enumerate(HOSTILE)]
    events = [u(), a(calls=calls), t(*results), a("ok", calls=[call("x", args='{"n": 1e999}')])]
    for fmt in ContextFormat:
        body = _strict(render_json(events, fmt))
        assert isinstance(body, dict)
        sdk.parse(fmt, body)


@pytest.mark.parametrize("args", ['{"n": 1e999}', '{"n": -1e400}', "[1E+999]"])
def test_arguments_that_overflow_a_double_are_refused_at_append_naming_the_field(
    args: str,
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        check_events([u(), a(calls=[call("c1"), call("c2", args=args)])], Limits())
    assert refused.value.field == "events[1].tool_calls[1].arguments_json"
    check_events(
        [u(), a(calls=[call("c1", args='{"n": 1e308, "m": 12345678901234567890}')])], Limits()
    )


def test_a_result_that_is_not_strict_json_is_sent_as_its_text() -> None:
    results = [result(f"c{i}", content) for i, content in enumerate(HOSTILE)]
    out = contents([u(), a(calls=[call(f"c{i}") for i in range(len(HOSTILE))]), t(*results)])
    responses = [p["functionResponse"]["response"] for p in out[2]["parts"]]
    assert responses == [{"result": content} for content in HOSTILE]


def test_a_json_object_result_that_is_an_error_still_says_so() -> None:
    events = [
        u(),
        a(calls=[call("c1"), call("c2"), call("c3")]),
        t(
            result("c1", '{"code": 404}', error=True),
            result("c2", '{"error": "gone"}', error=True),
            result("c3", '{"code": 200}'),
        ),
    ]
    responses = [p["functionResponse"]["response"] for p in contents(events)[2]["parts"]]
    assert responses == [{"error": {"code": 404}}, {"error": "gone"}, {"code": 200}]


def _calls(out: list[Any]) -> list[tuple[str, bytes | None]]:
    """Each functionCall part's id and its signature (decoded), in order."""
    return [
        (
            p["functionCall"]["id"],
            base64.b64decode(p["thoughtSignature"]) if "thoughtSignature" in p else None,
        )
        for c in out
        for p in c["parts"]
        if "functionCall" in p
    ]


def test_the_first_unsigned_call_of_each_step_of_the_current_turn_gets_the_bypass() -> None:
    events = [
        u("one"),
        a(calls=[call("old")]),
        t(result("old")),
        a("done"),
        u("two"),
        a(calls=[call("c1"), call("c2")]),
        t(result("c1"), result("c2")),
        a(calls=[call("c3", signature=b"\x12real")]),
        t(result("c3")),
        a(calls=[call("c4")]),
    ]
    assert _calls(contents(events)) == [
        ("old", None),  # an earlier turn: Gemini checks the current one only
        ("c1", SKIP_SIGNATURE),
        ("c2", None),  # parallel calls: only the first carries a signature
        ("c3", b"\x12real"),
        ("c4", SKIP_SIGNATURE),
    ]


def test_the_bypass_follows_the_turn_as_the_window_grows_and_kept_blocks_agree() -> None:
    kept = Fragments(1 << 20)
    events = [u("one"), a(calls=[call("c1")]), t(result("c1"))]
    grown = [*events, a("done"), u("two"), a(calls=[call("c2")])]
    for window in (events, events[:2], events, grown[:4], grown):
        assert render_json(window, ContextFormat.GEMINI, kept) == render_json(
            window, ContextFormat.GEMINI
        )
    assert _calls(contents(grown)) == [("c1", None), ("c2", SKIP_SIGNATURE)]
    assert _calls(contents(events)) == [("c1", SKIP_SIGNATURE)]


def test_reasoning_another_provider_wrote_is_not_sent_to_gemini() -> None:
    openai = a("a", reasoning=[thought("plan", b"gAAAAB", id="rs_1")])
    anthropic = a("b", reasoning=[thought("hmm", b"EqQBCk")]).evolve(
        metadata={PROVIDER_KEY: "anthropic"}
    )
    gemini = a("c", reasoning=[thought("mine", b"\x12\x9c")]).evolve(
        metadata={PROVIDER_KEY: "gemini"}
    )
    out = contents([u(), openai, anthropic, gemini])
    parts = out[1]["parts"]
    assert [p.get("thought", False) for p in parts] == [False, False, True, False]
    signatures = [base64.b64decode(p["thoughtSignature"]) for p in parts if "thoughtSignature" in p]
    assert signatures == [b"\x12\x9c"]
