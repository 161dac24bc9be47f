"""The session's model over gRPC: profiles, fraction-of-window triggers, calibration by usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from sidecar.errors import InvalidConfig
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2
from sidecar.server.config import ServerConfig
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

WORDS = "the quick brown fox jumps over the lazy dog " * 20  # 180 tokens


def fraction_policy(x: float) -> policy_pb2.CompactionPolicy:
    return policy_pb2.CompactionPolicy(
        trigger=policy_pb2.Trigger(context_fraction=x),
        strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=1)),
    )


def turn(n: int, text: str = WORDS) -> list[event_pb2.Event]:
    return [
        event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=text),
        event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text="ok"),
    ]


async def code_of(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value.code(), info.value.details() or ""


async def test_a_session_names_its_model_and_shows_its_profile(stub: Stub) -> None:
    created = await stub.CreateSession(
        pb.CreateSessionRequest(session_id="s", model="gemini-2.5-flash")
    )
    assert created.model == "gemini-2.5-flash"
    assert created.model_profile == session_pb2.ModelProfile(
        model="gemini-2.5-flash",
        provider="gemini",
        input_window_tokens=1_048_576,
        max_output_tokens=65_536,
    )
    assert (created.calibration.factor, created.calibration.samples) == (1.0, 0)
    # A dated snapshot takes its family's profile.
    moved = await stub.UpdateSession(
        pb.UpdateSessionRequest(
            session=session_pb2.Session(session_id="s", model="claude-sonnet-4-5-20250929"),
            update_mask=FieldMask(paths=["model"]),
        )
    )
    assert (moved.model, moved.model_profile.provider) == (
        "claude-sonnet-4-5-20250929",
        "anthropic",
    )
    assert (await stub.GetSession(pb.GetSessionRequest(session_id="s"))).model == moved.model


async def test_an_unknown_model_is_refused_naming_the_field_and_nothing_is_stored(
    stub: Stub,
) -> None:
    code, message = await code_of(
        stub.CreateSession(pb.CreateSessionRequest(session_id="s", model="gpt-99-turbo"))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("model:")
    assert "gpt-99-turbo" in message
    code, _ = await code_of(stub.GetSession(pb.GetSessionRequest(session_id="s")))
    assert code == grpc.StatusCode.NOT_FOUND
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", model="gpt-5"))
    code, message = await code_of(
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="s", model="nope"),
                update_mask=FieldMask(paths=["model"]),
            )
        )
    )
    assert (code, message.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "session.model")
    assert (await stub.GetSession(pb.GetSessionRequest(session_id="s"))).model == "gpt-5"


async def test_a_context_fraction_needs_a_model_up_front(stub: Stub) -> None:
    code, message = await code_of(
        stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=fraction_policy(0.5)))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("policy.trigger.context_fraction:")
    code, message = await code_of(
        stub.CreateSession(
            pb.CreateSessionRequest(session_id="s", policy=fraction_policy(1.5), model="gpt-5")
        )
    )
    assert message.startswith("policy.trigger.context_fraction:")
    # With a model it is taken; removing the model afterwards is refused, naming it.
    await stub.CreateSession(
        pb.CreateSessionRequest(session_id="s", policy=fraction_policy(0.5), model="gpt-5")
    )
    code, message = await code_of(
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="s"), update_mask=FieldMask(paths=["model"])
            )
        )
    )
    assert (code, message.split(":")[0]) == (grpc.StatusCode.INVALID_ARGUMENT, "session.model")
    # Setting such a policy on a session without a model is refused too.
    await stub.CreateSession(pb.CreateSessionRequest(session_id="t"))
    code, message = await code_of(
        stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="t", policy=fraction_policy(0.5)),
                update_mask=FieldMask(paths=["policy"]),
            )
        )
    )
    assert message.startswith("session.policy.trigger.context_fraction:")
    # Both in one update: taken.
    both = await stub.UpdateSession(
        pb.UpdateSessionRequest(
            session=session_pb2.Session(session_id="t", policy=fraction_policy(0.5), model="o3"),
            update_mask=FieldMask(paths=["policy", "model"]),
        )
    )
    assert both.policy.trigger.context_fraction == 0.5
    code, message = await code_of(
        stub.Compact(pb.CompactRequest(session_id="u", policy=fraction_policy(0.5), force=True))
    )
    assert code == grpc.StatusCode.NOT_FOUND


async def test_a_context_fraction_fires_at_that_share_of_the_window_less_the_output(
    tmp_path: Path,
) -> None:
    # A model of 1,000 tokens with 200 reserved for output: 0.5 fires at 400 tokens.
    profiles = tmp_path / "profiles.json"
    profiles.write_text(
        json.dumps(
            {
                "models": {
                    "tiny": {
                        "provider": "openai",
                        "input_window_tokens": 1000,
                        "max_output_tokens": 200,
                    }
                }
            }
        )
    )
    async with (
        running(tmp_path, model_profiles=str(profiles)) as sidecar,
        grpc.aio.insecure_channel(address(sidecar)) as channel,
    ):
        stub: Stub = pb_grpc.CompactionServiceStub(channel)
        await stub.CreateSession(
            pb.CreateSessionRequest(session_id="s", policy=fraction_policy(0.5), model="tiny")
        )
        first = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1)))
        assert not first.HasField("compaction")  # ~190 tokens: under 400
        second = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(2)))
        assert not second.HasField("compaction")  # ~380
        third = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(3)))
        assert third.compaction.compacted  # ~570 >= 400: one turn kept
        assert [e.id for e in third.compaction.active_events] == ["u3", "a3"]


async def test_usage_reports_calibrate_token_triggers_and_the_estimate(stub: Stub) -> None:
    policy = policy_pb2.CompactionPolicy(
        trigger=policy_pb2.Trigger(token_count=500),
        strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=1)),
    )
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=policy))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1)))
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert context.estimated_prompt_tokens == context.token_count
    # The provider counted twice our estimate for that context.
    reported = 2 * context.token_count
    ack = await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s",
            events=turn(2),
            usage=pb.ModelUsage(context_version=context.version, prompt_tokens=reported),
        )
    )
    assert ack.usage_ignored_reason == ""
    # The report lands with this append, before its trigger check: ~380 estimated
    # tokens are ~760 calibrated, past 500, so the append compacts.
    assert ack.compaction.compacted
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert (session.calibration.factor, session.calibration.samples) == (2.0, 1)
    after = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert after.estimated_prompt_tokens == 2 * after.token_count
    # The same appends without the report stay under 500.
    await stub.CreateSession(pb.CreateSessionRequest(session_id="plain", policy=policy))
    for n in (1, 2):
        plain = await stub.AppendEvents(pb.AppendEventsRequest(session_id="plain", events=turn(n)))
        assert not plain.HasField("compaction")


async def test_a_report_for_an_unknown_version_is_ignored_with_a_reason(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    ack = await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s",
            events=turn(1),
            usage=pb.ModelUsage(context_version=999, prompt_tokens=100),
        )
    )
    assert [e.id for e in ack.events] == ["u1", "a1"]  # stored all the same
    assert "999" in ack.usage_ignored_reason
    assert "not reached yet" in ack.usage_ignored_reason  # a version from the future
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert session.calibration.samples == 0
    # Bad values are the caller's error, and nothing of the append is stored.
    code, message = await code_of(
        stub.AppendEvents(
            pb.AppendEventsRequest(
                session_id="s",
                events=turn(2),
                usage=pb.ModelUsage(context_version=session.version, prompt_tokens=0),
            )
        )
    )
    assert (code, message.split(":")[0]) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "usage.prompt_tokens",
    )
    assert (await stub.GetSession(pb.GetSessionRequest(session_id="s"))).version == session.version


async def test_a_streamed_report_calibrates_and_is_acknowledged_on_its_own(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1)))
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    half = context.token_count // 2
    requests = [
        pb.StreamEventsRequest(request_id="r1", session_id="s", events=turn(2)[:1]),
        pb.StreamEventsRequest(
            request_id="r2",
            session_id="s",
            events=turn(2)[1:],
            usage=pb.ModelUsage(context_version=context.version, prompt_tokens=half),
        ),
        pb.StreamEventsRequest(
            request_id="r3",
            session_id="s",
            events=turn(3),
            usage=pb.ModelUsage(context_version=1, prompt_tokens=5),
        ),
    ]
    answers = [a async for a in stub.StreamEvents(iter(requests))]
    assert [a.request_id for a in answers] == ["r1", "r2", "r3"]
    assert answers[1].append.usage_ignored_reason == ""
    assert "version 1" in answers[2].append.usage_ignored_reason
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert session.calibration.samples == 1
    # Held against the exact count of that context: its events were counted for the report.
    assert context.token_count_estimated
    listed = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    counted = listed.events[: len(context.events)]
    assert not any(e.token_count_estimated for e in counted)
    exact = sum(e.token_count for e in counted)
    assert session.calibration.factor == pytest.approx(half / exact)


def test_a_bad_profiles_file_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text('{"models": {"m": {"provider": "openai", "input_window_tokens": 10}}}')
    with pytest.raises(InvalidConfig) as info:
        ServerConfig(model_profiles=str(bad)).profiles()
    assert str(info.value).startswith("model_profiles: models.m.max_output_tokens:")
    with pytest.raises(InvalidConfig) as info:
        ServerConfig(model_profiles=str(tmp_path / "missing.json")).profiles()
    assert str(info.value).startswith("model_profiles:")


async def test_a_default_policy_with_a_context_fraction_is_refused_at_start(
    tmp_path: Path,
) -> None:
    # Sessions an append creates take the default policy and have no model.
    policy = {"trigger": {"context_fraction": 0.8}, "strategy": {"token_budget": {}}}
    with pytest.raises(InvalidConfig) as info:
        async with running(tmp_path, default_policy=json.dumps(policy)):
            pass
    assert info.value.field == "default_policy.trigger.context_fraction"


async def test_calibration_does_not_outlive_delete_session(stub: Stub) -> None:
    """The issue's probe: delete, create again under the id, report either life's versions."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    for n in range(1, 11):
        await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(n)))
    old = await stub.GetContext(pb.GetContextRequest(session_id="s"))  # an estimate kept
    await stub.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1)))
    new = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    stale = await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s",
            events=turn(2),
            usage=pb.ModelUsage(context_version=old.version, prompt_tokens=1),
        )
    )
    assert str(old.version) in stale.usage_ignored_reason
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert (session.calibration.factor, session.calibration.samples) == (1.0, 0)
    counted = await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s",
            events=turn(3),
            usage=pb.ModelUsage(context_version=new.version, prompt_tokens=2 * new.token_count),
        )
    )
    assert counted.usage_ignored_reason == ""
    session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert (session.calibration.factor, session.calibration.samples) == (2.0, 1)


async def test_a_model_change_starts_the_calibration_anew(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", model="gpt-4o"))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1)))
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    await stub.AppendEvents(
        pb.AppendEventsRequest(
            session_id="s",
            events=turn(2),
            usage=pb.ModelUsage(
                context_version=context.version, prompt_tokens=context.token_count // 2
            ),
        )
    )
    calibrated = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert calibrated.calibration.samples == 1
    moved = await stub.UpdateSession(
        pb.UpdateSessionRequest(
            session=session_pb2.Session(session_id="s", model="claude-sonnet-4-5"),
            update_mask=FieldMask(paths=["model"]),
        )
    )
    assert (moved.calibration.factor, moved.calibration.samples) == (1.0, 0)
