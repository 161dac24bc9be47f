"""The Python conformance runner: starts a real server, replays scenarios.json, matches results.

The matching rules live here once for Python and are the ones every other
runner (TypeScript, Go, Java) implements; ``tests/conformance/README.md``
states them. Each step is made through the Python client's call path
(``AsyncClient._unary``: its deadline, its UNAVAILABLE retries for the calls
its wrapper retries, its ``ClientError`` with the server's details; GetContext
through ``context()`` itself, which reads an oversized window in parts), with the
request parsed from proto3 JSON and the response printed back to proto3 JSON,
so what is compared is what crossed the wire, not a conversion of it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from sidecar.client import AsyncClient, ClientError
from sidecar.client.errors import error_from_rpc
from sidecar.client.requests import FORMATS
from sidecar.compaction.policy import policy_from_dict
from sidecar.errors import InvalidConfig
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.server import convert

SCENARIOS = Path(__file__).with_name("scenarios.json")
LISTENING = re.compile(r"listening on \S+ \(port (\d+)\)")
DEFAULTS: tuple[object, ...] = (False, 0, "0", "", (), ())

# call name -> (request type, whether the Python wrapper retries it on UNAVAILABLE)
UNARY: dict[str, tuple[type[Message], bool]] = {
    "CreateSession": (pb.CreateSessionRequest, False),
    "GetSession": (pb.GetSessionRequest, True),
    "ListSessions": (pb.ListSessionsRequest, True),
    "UpdateSession": (pb.UpdateSessionRequest, False),
    "DeleteSession": (pb.DeleteSessionRequest, False),
    "AppendEvents": (pb.AppendEventsRequest, True),
    "GetContext": (pb.GetContextRequest, True),
    "Compact": (pb.CompactRequest, False),
    "ListEvents": (pb.ListEventsRequest, True),
    "SearchEvents": (pb.SearchEventsRequest, True),
    "ListCompactions": (pb.ListCompactionsRequest, True),
    "RestoreCompaction": (pb.RestoreCompactionRequest, False),
}
CAPTURED = re.compile(r"\$\{(\w+)\}")


def load(path: Path = SCENARIOS) -> dict[str, Any]:
    """The scenario file, checked for the format version this runner speaks."""
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("format") != 1:
        raise ValueError(f"{path}: unsupported format {doc.get('format')!r}")
    return doc


def scenario_names(path: Path = SCENARIOS) -> list[str]:
    return [s["name"] for s in load(path)["scenarios"]]


# -- matching -----------------------------------------------------------------


def _is_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return value.strip() != ""
    return False


def _is_default(value: object) -> bool:
    if isinstance(value, list | dict):
        return not value
    if _is_number(value):
        return float(value) == 0  # type: ignore[arg-type]
    return value in (False, "")


def match(expected: object, actual: object, path: str = "$") -> list[str]:
    """Where ``actual`` differs from ``expected`` under the subset rules; empty when it matches.

    Objects match on the expected keys only, arrays element-wise with equal
    length, ``"*"`` matches anything present, numbers and numeric strings by
    value, and a key absent from the actual JSON matches an expected default.
    """
    if expected == "*":
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {json.dumps(actual)}"]
        problems: list[str] = []
        for key, want in expected.items():
            if key not in actual:
                if not _is_default(want):
                    problems.append(f"{path}.{key}: missing, expected {json.dumps(want)}")
                continue
            problems.extend(match(want, actual[key], f"{path}.{key}"))
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {json.dumps(expected)}, got {json.dumps(actual)}"]
        return [p for i, w in enumerate(expected) for p in match(w, actual[i], f"{path}[{i}]")]
    if _is_number(expected) and _is_number(actual):
        if float(expected) == float(actual):  # type: ignore[arg-type]
            return []
    elif expected == actual:
        return []
    return [f"{path}: expected {json.dumps(expected)}, got {json.dumps(actual)}"]


def _ids(events: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e.get("id", "")) for e in events]


@dataclass
class Outcome:
    """What a step produced: the status code name, its message, the response as proto3 JSON."""

    code: str
    message: str = ""
    response: Any = None
    field_violations: list[str] | None = None


def check(expect: Mapping[str, Any], outcome: Outcome) -> list[str]:
    """Every way ``outcome`` misses ``expect``; empty when the step passes."""
    problems: list[str] = []
    want_code = expect.get("code", "OK")
    if outcome.code != want_code:
        problems.append(f"code: expected {want_code}, got {outcome.code} ({outcome.message})")
        return problems
    if "message_contains" in expect and expect["message_contains"] not in outcome.message:
        problems.append(
            f"message: expected to contain {expect['message_contains']!r}, got {outcome.message!r}"
        )
    if "field_violations" in expect:
        problems.extend(
            match(expect["field_violations"], outcome.field_violations or [], "field_violations")
        )
    if outcome.code != "OK":
        return problems
    response = outcome.response
    if "response" in expect:
        problems.extend(match(expect["response"], response, "response"))
    if "responses" in expect:
        problems.extend(match(expect["responses"], response, "responses"))
    if isinstance(response, dict):
        events = response.get("events", [])
        if "event_ids" in expect:
            problems.extend(match(expect["event_ids"], _ids(events), "event_ids"))
        if "archived_ids" in expect:
            archived = [e for e in events if e.get("archived")]
            problems.extend(match(expect["archived_ids"], _ids(archived), "archived_ids"))
        if "hit_event_ids" in expect:
            hits = [h.get("event", {}) for h in response.get("hits", [])]
            problems.extend(match(expect["hit_event_ids"], _ids(hits), "hit_event_ids"))
        if "rendered" in expect:
            problems.extend(_rendered(expect["rendered"], response.get("renderedJson", "")))
    if "differs" in expect:
        problems.extend(_differs(expect["differs"], response))
    return problems


def _differs(expected: Mapping[str, Sequence[object]], response: Any) -> list[str]:
    """``differs``: the value at each dotted path is present and matches none of its listed values.

    How a scenario pins that an id moved (a cache prefix id after a compaction)
    without knowing either value: both come from ``capture``.
    """
    problems: list[str] = []
    for path, values in expected.items():
        actual = at(response, path)
        if not isinstance(values, list):
            problems.append(f"differs {path}: expected a list of values, got {json.dumps(values)}")
        elif actual is None:
            problems.append(f"differs {path}: absent from {json.dumps(response)}")
        else:
            problems.extend(
                f"differs {path}: expected other than {json.dumps(v)}, got {json.dumps(actual)}"
                for v in values
                if not match(v, actual)
            )
    return problems


def _rendered(expected: object, rendered_json: str) -> list[str]:
    """``rendered`` matched, under the same rules, against the parsed ``renderedJson``."""
    if not rendered_json:
        return ["rendered: the response has no renderedJson"]
    try:
        parsed = json.loads(rendered_json)
    except ValueError as exc:
        return [f"rendered: renderedJson is not JSON ({exc}): {rendered_json!r}"]
    return match(expected, parsed, "rendered")


# -- the server -----------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    address: str
    process: subprocess.Popen[str]


@contextmanager
def serve(binary: str, server_args: Sequence[str], timeout_s: float = 30.0) -> Iterator[Server]:
    """``compaction-sidecar serve`` on a port the kernel picks, over SQLite in a temp dir.

    ``--listen 127.0.0.1:0`` and the port read back from the startup line
    leave no window for another process to take a port chosen in advance.
    """
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        command = [
            binary,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            f"sqlite:///{Path(tmp) / 'conformance.db'}",
            "--shutdown-grace-s",
            "0.5",
            *server_args,
        ]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            found = LISTENING.search(line)
            if found is None:
                raise RuntimeError(f"server did not start: {line!r}, exit {process.poll()}")
            yield Server(f"127.0.0.1:{found.group(1)}", process)
        finally:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# -- running a scenario -----------------------------------------------------------


def _to_json(message: Message) -> Any:
    return json_format.MessageToDict(message)


def _failure(exc: ClientError) -> Outcome:
    return Outcome(
        code=exc.code.name,
        message=exc.message,
        field_violations=[v.field for v in exc.field_violations],
    )


async def _stream(client: AsyncClient, requests: Sequence[Mapping[str, Any]]) -> Outcome:
    """Send every request, half-close, and collect every response until the server ends."""
    messages = [json_format.ParseDict(dict(r), pb.StreamEventsRequest()) for r in requests]

    async def outgoing() -> AsyncIterator[pb.StreamEventsRequest]:
        for message in messages:
            yield message

    call = client._stub.StreamEvents(outgoing(), timeout=client.default_timeout)
    try:
        responses = [_to_json(r) async for r in call]
    except grpc.RpcError as exc:
        return _failure(error_from_rpc(exc))
    return Outcome(code="OK", response=responses)


async def _context(client: AsyncClient, request: pb.GetContextRequest) -> Outcome:
    """GetContext through ``context()``, which reads a window sent without content in parts.

    Printed back as the GetContextResponse it stands for: the whole window,
    with content, so ``contentOmitted`` is absent (false), its rendering
    when the request asked for a format, and its cache prefix id and stable
    prefix as the header answer gave them.
    """
    format = {value: name for name, value in FORMATS.items()}.get(request.format)
    try:
        window = await client.session(request.session_id).context(format=format)
    except ClientError as exc:
        return _failure(exc)
    answer = pb.GetContextResponse(
        version=window.version,
        token_count=window.token_count,
        turn_count=window.turn_count,
        rendered_json=window.rendered_json,
        estimated_prompt_tokens=window.estimated_prompt_tokens,
        cache_prefix_id=window.cache_prefix_id,
        stable_prefix_tokens=window.stable_prefix_tokens,
        stable_prefix_events=window.stable_prefix_events,
        token_count_estimated=window.token_count_estimated,
        stable_prefix_tokens_estimated=window.stable_prefix_tokens_estimated,
    )
    convert.events_out(window.events, answer.events)
    return Outcome(code="OK", response=_to_json(answer))


async def _compactions(client: AsyncClient, session_id: str) -> Outcome:
    """ListCompactions through ``compactions()``, every page collected into one response; a
    record whose ids were left out (too many for a page) comes with them read in parts."""
    out = pb.ListCompactionsResponse()
    try:
        async for record in client.session(session_id).compactions():
            convert.record_out(record, out.compactions.add())
    except ClientError as exc:
        return _failure(exc)
    return Outcome(code="OK", response=_to_json(out))


async def run_step(client: AsyncClient, step: Mapping[str, Any]) -> Outcome:
    """One step through the client's call path; failures become their status code name."""
    name = step["call"]
    if name == "StreamEvents":
        return await _stream(client, step["requests"])
    request_type, retry = UNARY[name]
    request = json_format.ParseDict(dict(step.get("request", {})), request_type())
    if "policy_document" in step:
        # The client's own policy reader, as a user hands it a document.
        assert isinstance(request, pb.CreateSessionRequest), "policy_document is for CreateSession"
        try:
            convert.policy_out(policy_from_dict(step["policy_document"]), request.policy)
        except InvalidConfig as exc:
            return Outcome(code="INVALID_ARGUMENT", message=str(exc))
    if isinstance(request, pb.GetContextRequest):
        return await _context(client, request)
    if isinstance(request, pb.ListCompactionsRequest) and not (
        request.page_size or request.page_token or request.ids_of
    ):
        return await _compactions(client, request.session_id)
    method = getattr(client._stub, name)
    try:
        response = await client._unary(method, request, retry=retry)
    except ClientError as exc:
        return _failure(exc)
    return Outcome(code="OK", response=_to_json(response))


def substitute(value: Any, captured: Mapping[str, str]) -> Any:
    """``value`` with every ``${name}`` in its strings replaced by what an earlier step captured."""
    if isinstance(value, str):

        def lookup(found: re.Match[str]) -> str:
            if found.group(1) not in captured:
                raise KeyError(f"${{{found.group(1)}}} was not captured by an earlier step")
            return captured[found.group(1)]

        return CAPTURED.sub(lookup, value)
    if isinstance(value, list):
        return [substitute(v, captured) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, captured) for k, v in value.items()}
    return value


def at(response: Any, path: str) -> Any:
    """The value at a dotted ``path`` of a printed response (numbers index arrays), or None."""
    value = response
    for key in path.split("."):
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return None
    return value


def capture(paths: Mapping[str, str], response: Any) -> tuple[dict[str, str], list[str]]:
    """The string values at ``paths`` (dotted keys; numbers index arrays), and what is missing.

    A value a server assigns (a compaction id, a page token) is taken from one
    step's answer and named, so that later steps can send it and expect it.
    """
    values: dict[str, str] = {}
    problems: list[str] = []
    for name, path in paths.items():
        value = at(response, path)
        if isinstance(value, str) and value:
            values[name] = value
        else:
            problems.append(f"capture {name}: no string at {path} of {json.dumps(response)}")
    return values, problems


async def run_scenario(client: AsyncClient, scenario: Mapping[str, Any]) -> list[str]:
    """Every mismatch of the scenario's steps, each naming the scenario and the step index."""
    failures: list[str] = []
    captured: dict[str, str] = {}
    for index, written in enumerate(scenario["steps"]):
        step = substitute(written, captured)
        outcome = await run_step(client, step)
        problems = check(step.get("expect", {}), outcome)
        if not problems and "capture" in step:
            values, problems = capture(step["capture"], outcome.response)
            captured.update(values)
        if problems:
            failures.append(
                f"{scenario['name']} step {index} ({step['call']}):\n  "
                + "\n  ".join(problems)
                + f"\n  expected: {json.dumps(step.get('expect', {}))}"
                + f"\n  actual:   code={outcome.code} response={json.dumps(outcome.response)}"
            )
            break  # later steps build on this one
    return failures
