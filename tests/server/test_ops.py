"""Operations: auth, TLS, health (and during drain), reflection, the serve command."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.server.harness import address, free_port, running
from tests.tls import key_pem, make_cert, pem

if TYPE_CHECKING:
    pass


# -- auth -----------------------------------------------------------------------


async def test_bearer_token_required_except_for_health_and_reflection(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# agents\ns3cret-one\ns3cret-two\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            request = pb.CreateSessionRequest(session_id="s")
            for metadata in [
                (),
                (("authorization", "Bearer wrong"),),
                (("authorization", "s3cret-one"),),
            ]:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.CreateSession(request, metadata=metadata)
                assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            session = await stub.CreateSession(
                request, metadata=(("authorization", "Bearer s3cret-two"),)
            )
            assert session.session_id == "s"
            call: Any = stub.StreamEvents(metadata=(("authorization", "Bearer nope"),))  # type: ignore[call-arg]
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call.read()
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=""))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


# -- TLS --------------------------------------------------------------------------


async def test_mutual_tls_refuses_clients_without_a_valid_certificate(tmp_path: Path) -> None:
    ca = make_cert("test-ca", None, ca=True)
    server = make_cert("localhost", ca, ca=False)
    client = make_cert("agent", ca, ca=False)
    stranger_ca = make_cert("other-ca", None, ca=True)
    stranger = make_cert("intruder", stranger_ca, ca=False)
    files = {
        "ca.pem": pem(ca[0]),
        "server.pem": pem(server[0]),
        "server.key": key_pem(server[1]),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    async with running(
        tmp_path,
        listen="localhost:0",
        tls_cert=str(tmp_path / "server.pem"),
        tls_key=str(tmp_path / "server.key"),
        tls_client_ca=str(tmp_path / "ca.pem"),
    ) as sidecar:
        target = f"localhost:{sidecar.port}"
        good = grpc.ssl_channel_credentials(pem(ca[0]), key_pem(client[1]), pem(client[0]))
        async with grpc.aio.secure_channel(target, good) as channel:
            session = await pb_grpc.CompactionServiceStub(channel).CreateSession(
                pb.CreateSessionRequest(session_id="tls")
            )
            assert session.session_id == "tls"
        for credentials in [
            grpc.ssl_channel_credentials(pem(ca[0])),  # no client certificate
            grpc.ssl_channel_credentials(pem(ca[0]), key_pem(stranger[1]), pem(stranger[0])),
        ]:
            async with grpc.aio.secure_channel(target, credentials) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await pb_grpc.CompactionServiceStub(channel).GetSession(
                        pb.GetSessionRequest(session_id="tls"), timeout=5
                    )
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        async with grpc.aio.insecure_channel(target) as channel:  # plaintext to a TLS port
            with pytest.raises(grpc.aio.AioRpcError):
                await pb_grpc.CompactionServiceStub(channel).GetSession(
                    pb.GetSessionRequest(session_id="tls"), timeout=5
                )


# -- health and reflection ------------------------------------------------------------


async def test_health_listener_reports_not_serving_while_draining(tmp_path: Path) -> None:
    health_port = free_port()
    async with running(tmp_path, health_listen=f"127.0.0.1:{health_port}") as sidecar:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{health_port}") as probe_channel:
            probe = health_pb2_grpc.HealthStub(probe_channel)
            for service in ("", "compaction.v1.CompactionService"):
                reply = await probe.Check(health_pb2.HealthCheckRequest(service=service))
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            async with grpc.aio.insecure_channel(address(sidecar)) as channel:
                stub = pb_grpc.CompactionServiceStub(channel)
                await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
                watch = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
                await watch.wait_for_connection()  # a call in flight keeps the drain going
                stopping = asyncio.create_task(sidecar.stop(grace_s=2.0))
                await asyncio.sleep(0.3)
                reply = await probe.Check(
                    health_pb2.HealthCheckRequest(service="compaction.v1.CompactionService")
                )
                assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING
                await stopping
                with pytest.raises(grpc.aio.AioRpcError):
                    await watch.read()


async def test_reflection_lists_the_services(sidecar: object, tmp_path: Path) -> None:
    from sidecar.server.app import Sidecar

    assert isinstance(sidecar, Sidecar)
    channel = grpc.insecure_channel(address(sidecar))
    try:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = await asyncio.to_thread(database.get_services)
        assert "compaction.v1.CompactionService" in services
        assert "grpc.health.v1.Health" in services
        descriptor = await asyncio.to_thread(
            database.FindFileContainingSymbol, "compaction.v1.CompactionService"
        )
        assert descriptor.package == "compaction.v1"
        # The documentation travels too, so `grpcurl describe` shows each field's comment.
        comments = {
            location.leading_comments.strip()
            for location in descriptor.source_code_info.location
            if location.leading_comments
        }
        assert any(c.startswith("Label changes stored in the same transaction") for c in comments)
        health_file = await asyncio.to_thread(
            database.FindFileContainingSymbol, "grpc.health.v1.Health"
        )
        assert health_file.package == "grpc.health.v1"
    finally:
        channel.close()


@pytest.mark.parametrize(
    "detail", ["google.rpc.BadRequest", "google.rpc.ErrorInfo", "google.rpc.Status"]
)
async def test_reflection_serves_the_error_details(sidecar: object, detail: str) -> None:
    """grpcurl resolves an error's ``Any`` details by reflection; unserved, it prints base64."""
    from sidecar.server.app import Sidecar

    assert isinstance(sidecar, Sidecar)
    channel = grpc.insecure_channel(address(sidecar))
    try:
        pool = DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        message = await asyncio.to_thread(pool.FindMessageTypeByName, detail)
        assert message.full_name == detail
    finally:
        channel.close()


GRPCURL = (
    Path(__file__).resolve().parents[2] / ".tools" / "bin" / "grpcurl"
)  # make unit installs it


async def test_grpcurl_prints_an_errors_field_violations(sidecar: object) -> None:
    from sidecar.server.app import Sidecar

    assert isinstance(sidecar, Sidecar)
    request = '{"session_id": "x", "events": [{"text": "hi"}]}'
    done = await asyncio.to_thread(
        subprocess.run,
        [
            str(GRPCURL),
            "-plaintext",
            "-d",
            request,
            address(sidecar),
            "compaction.v1.CompactionService/AppendEvents",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "google.rpc.BadRequest" in done.stderr
    assert "is not recognized" not in done.stderr
    assert '"field": "events[0].role"' in done.stderr, done.stderr


# -- the serve command ----------------------------------------------------------------


def test_serve_command_starts_on_defaults_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "COMPACTION_LISTEN": f"127.0.0.1:{port}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "sidecar.cli", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:  # log lines first, then the banner
            if "listening on" in line:
                break
        assert f"listening on 127.0.0.1:{port}" in line
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            stub.CreateSession(pb.CreateSessionRequest(session_id="cli"), timeout=10)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert (tmp_path / "compaction.db").exists()  # the embedded default store
    finally:
        if process.poll() is None:
            process.kill()


def test_serve_rejects_a_bad_default_policy(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli",
            "serve",
            "--default-policy",
            '{"strategy": {"nope": {}}}',
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "default_policy.strategy" in result.stderr


# -- faults -----------------------------------------------------------------------------


async def test_health_goes_not_serving_while_the_store_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.errors import StoreUnavailable

    async with running(tmp_path, store_probe_interval_s=0.05) as sidecar:
        store = sidecar.engine.store
        healthy_ping = store.ping

        async def broken_ping() -> None:
            raise StoreUnavailable("disk gone")

        async def status(service: str = "") -> int:
            async with grpc.aio.insecure_channel(address(sidecar)) as channel:
                probe = health_pb2_grpc.HealthStub(channel)
                reply = await probe.Check(health_pb2.HealthCheckRequest(service=service))
                return int(reply.status)

        monkeypatch.setattr(store, "ping", broken_ping)
        await asyncio.sleep(0.3)
        assert await status() == health_pb2.HealthCheckResponse.NOT_SERVING
        # Liveness is about the process: an outage of the store restarts no pod.
        assert await status("liveness") == health_pb2.HealthCheckResponse.SERVING
        monkeypatch.setattr(store, "ping", healthy_ping)
        await asyncio.sleep(0.3)
        assert await status() == health_pb2.HealthCheckResponse.SERVING


async def test_a_cancelled_append_is_all_or_nothing(tmp_path: Path) -> None:
    from sidecar.gen.compaction.v1 import event_pb2

    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
            batch = 500
            for attempt in range(6):
                events = [
                    event_pb2.Event(id=f"{attempt}-{i}", role=event_pb2.ROLE_USER, text="hi " * 50)
                    for i in range(batch)
                ]
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await stub.AppendEvents(
                        pb.AppendEventsRequest(session_id="s", events=events),
                        timeout=0.002 * (attempt + 1),
                    )
            await asyncio.sleep(0.5)  # let any transaction already handed to SQLite finish
            session = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
            assert session.total_event_count % batch == 0
            log = await stub.ListEvents(pb.ListEventsRequest(session_id="s", page_size=1000))
            positions = [e.position for e in log.events]
            assert positions == list(range(1, len(positions) + 1))


async def test_streams_past_the_per_connection_limit_are_refused_by_name(tmp_path: Path) -> None:
    async with running(tmp_path, max_streams_per_connection=2) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
            watches = [stub.WatchSession(pb.WatchSessionRequest(session_id="s")) for _ in range(2)]
            for watch in watches:
                await watch.initial_metadata()
            third = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await third.read()
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_streams_per_connection" in (refused.value.details() or "")
            watches[0].cancel()
            await asyncio.sleep(0.1)
            fourth = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
            await fourth.initial_metadata()
            with pytest.raises(TimeoutError):  # a slot came free: it stays open
                await asyncio.wait_for(asyncio.shield(fourth.code()), 0.3)
            fourth.cancel()
            watches[1].cancel()
        # Another connection has its own allowance.
        async with grpc.aio.insecure_channel(address(sidecar)) as other:
            stub = pb_grpc.CompactionServiceStub(other)
            again = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
            await again.initial_metadata()
            again.cancel()


async def test_an_append_draining_at_shutdown_still_plans_its_pass(tmp_path: Path) -> None:
    """Stopping lets calls in flight finish: an append that landed and plans its window pass
    while the server drains must not fail because the planning threads went first."""
    async with running(tmp_path) as sidecar:
        work = sidecar.engine.window_work
        plan = work.run
        planning, release = asyncio.Event(), asyncio.Event()

        async def held(*args: object, **kwargs: object) -> object:
            planning.set()
            await release.wait()
            return await plan(*args, **kwargs)  # type: ignore[arg-type]

        work.run = held  # type: ignore[method-assign, assignment]
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            create = pb.CreateSessionRequest(session_id="s")
            create.policy.trigger.event_count = 2
            create.policy.strategy.sliding_window.max_events = 1
            await stub.CreateSession(create)
            events = [
                event_pb2.Event(id=f"e{i}", role=event_pb2.ROLE_USER, text=f"m {i}")
                for i in range(3)
            ]
            append = asyncio.ensure_future(
                stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events))
            )
            await planning.wait()
            stopping = asyncio.create_task(sidecar.stop(grace_s=5.0))
            await asyncio.sleep(0.3)  # the engine has closed what it closes while calls drain
            release.set()
            reply = await append
            assert reply.compaction.compacted
            await stopping
