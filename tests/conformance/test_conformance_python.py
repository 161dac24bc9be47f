"""The shared conformance scenarios against a real ``compaction-sidecar serve``, in Python.

The same file drives the TypeScript, Go and Java runners; a scenario that
passes here and fails there is a client bug (or a format ambiguity to settle
in tests/conformance/README.md), never a server one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.client import AsyncClient
from tests.conformance import runner

DOC = runner.load()
BY_NAME = {s["name"]: s for s in DOC["scenarios"]}


def _binary() -> str:
    """``SIDECAR_BIN``, else the console script installed next to this interpreter."""
    return os.environ.get("SIDECAR_BIN") or str(
        Path(sys.executable).with_name("compaction-sidecar")
    )


@pytest.fixture(scope="module")
def server() -> Iterator[runner.Server]:
    """One server for every scenario, as the format prescribes (scenarios use distinct ids)."""
    with runner.serve(_binary(), DOC["server_args"]) as started:
        yield started


@pytest.mark.parametrize("name", list(BY_NAME))
async def test_scenario(server: runner.Server, name: str) -> None:
    async with AsyncClient(server.address, default_timeout=30.0) as client:
        failures = await runner.run_scenario(client, BY_NAME[name])
    assert not failures, "\n".join(failures)


def test_scenario_names_are_unique_and_sessions_distinct() -> None:
    """Scenarios share one server: a reused session id would couple them."""
    names = [s["name"] for s in DOC["scenarios"]]
    assert len(names) == len(set(names))
    owner: dict[str, str] = {}
    for scenario in DOC["scenarios"]:
        for step in scenario["steps"]:
            for request in step.get("requests", [step.get("request", {})]):
                named = [request.get("sessionId")]
                named += [u.get("sessionId") for u in request.get("labelUpdates", [])]
                for session_id in filter(None, named):
                    assert owner.setdefault(session_id, scenario["name"]) == scenario["name"]


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ({"version": "2"}, {"version": 2, "other": 1}, True),
        ({"version": "2"}, {"version": "3"}, False),
        ({"compacted": False}, {}, True),
        ({"events": []}, {}, True),
        ({"version": "0"}, {}, True),
        ({"compacted": True}, {}, False),
        ({"events": [{"id": "*"}]}, {"events": [{"id": "x"}, {"id": "y"}]}, False),
        (["*", "b"], ["a", "b"], True),
        ({"a": {"b": "c"}}, {"a": {"b": "c", "d": "e"}}, True),
        ({"tokenCount": "1.0"}, {"tokenCount": 1}, True),
        ({"text": "yes"}, {"text": "no"}, False),
    ],
)
def test_matching_rules(expected: object, actual: object, ok: bool) -> None:
    """The subset rules every runner implements: a runner that passes everything proves nothing."""
    assert (runner.match(expected, actual) == []) is ok


def test_a_wrong_expectation_fails_with_the_step_and_both_sides() -> None:
    outcome = runner.Outcome(code="OK", response={"events": [{"id": "u1"}], "version": "1"})
    problems = runner.check({"event_ids": ["u2"], "response": {"version": "1"}}, outcome)
    assert problems == ['event_ids[0]: expected "u2", got "u1"']
    wrong_code = runner.check({"code": "NOT_FOUND"}, runner.Outcome(code="OK"))
    assert wrong_code == ["code: expected NOT_FOUND, got OK ()"]


def test_rendered_is_matched_against_the_parsed_rendering() -> None:
    outcome = runner.Outcome(code="OK", response={"renderedJson": '{"messages":[{"role":"user"}]}'})
    assert runner.check({"rendered": {"messages": [{"role": "user"}]}}, outcome) == []
    assert runner.check({"rendered": {"messages": [{"role": "system"}]}}, outcome) == [
        'rendered.messages[0].role: expected "system", got "user"'
    ]
    unrendered = runner.Outcome(code="OK", response={})
    assert runner.check({"rendered": {}}, unrendered) == [
        "rendered: the response has no renderedJson"
    ]


def test_captured_values_are_substituted_into_later_steps() -> None:
    """A server-assigned id named by ``capture`` is sent and expected as ``${name}`` later on."""
    response = {"result": {"compactionId": "c9"}, "compactions": [{"compactionId": "c8"}]}
    values, missing = runner.capture(
        {"newer": "result.compactionId", "older": "compactions.0.compactionId"}, response
    )
    assert (values, missing) == ({"newer": "c9", "older": "c8"}, [])
    step = {"request": {"compactionId": "${older}"}, "expect": {"message_contains": "${newer} is"}}
    assert runner.substitute(step, values) == {
        "request": {"compactionId": "c8"},
        "expect": {"message_contains": "c9 is"},
    }


def test_a_capture_that_finds_nothing_fails_the_step() -> None:
    values, missing = runner.capture({"token": "nextPageToken"}, {"compactions": []})
    assert values == {}
    assert missing == ['capture token: no string at nextPageToken of {"compactions": []}']
    with pytest.raises(KeyError, match="was not captured"):
        runner.substitute({"compactionId": "${never}"}, {})


def test_differs_fails_when_the_value_matches_one_listed() -> None:
    """``differs`` pins that a captured id moved (a cache prefix id after a compaction)."""
    outcome = runner.Outcome(code="OK", response={"cachePrefixId": "p2", "stablePrefixEvents": 2})
    assert runner.check({"differs": {"cachePrefixId": ["p0", "p1"]}}, outcome) == []
    assert runner.check({"differs": {"cachePrefixId": ["p1", "p2"]}}, outcome) == [
        'differs cachePrefixId: expected other than "p2", got "p2"'
    ]
    assert runner.check({"differs": {"stablePrefixEvents": ["2"]}}, outcome) == [
        'differs stablePrefixEvents: expected other than "2", got 2'
    ]
    absent = runner.check({"differs": {"cachePrefixId": ["p1"]}}, runner.Outcome("OK", response={}))
    assert absent == ["differs cachePrefixId: absent from {}"]
    not_a_list = runner.check({"differs": {"cachePrefixId": "p1"}}, outcome)
    assert not_a_list == ['differs cachePrefixId: expected a list of values, got "p1"']
