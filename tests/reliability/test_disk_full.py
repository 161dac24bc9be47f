"""A disk that fills up: UNAVAILABLE, nothing half-written, and recovery when space returns.

Two ways to fill it:

- injected: the SQLite writer's connection is wrapped so that, while "full",
  COMMIT (and now and then an INSERT mid-transaction) raises
  ``sqlite3.OperationalError("database or disk is full")``, under load from
  the usual clients (they retry UNAVAILABLE) plus a prober whose refused
  appends are never retried, so their ids must never appear;
- real: the database on a 2 MiB tmpfs filled by a ballast file. mount(2)
  needs root; an ordinary user's run repeats the test as root of a user and
  mount namespace of its own (``unshare --user --map-root-user --mount``),
  where the tmpfs is its alone. Where the kernel allows neither, it fails.

Either way the history must check out afterwards and the file must pass
``PRAGMA integrity_check``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.store.sqlite import SqliteStore
from tests.reliability.budget import BUDGET, FIGURES
from tests.reliability.history import History, check_history, read_log
from tests.reliability.load import background, clients_for, create_sessions
from tests.server.harness import address, running

DISK_FULL = "database or disk is full"


class FillingDisk:
    """Stands in for the writer's sqlite3.Connection; while ``full``, writes fail as on ENOSPC."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real
        self.full = False
        self.failures = 0
        self.rng = random.Random(7)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        statement = sql.lstrip().upper()
        failing = statement.startswith("COMMIT") or (
            statement.startswith("INSERT") and self.rng.random() < 0.3
        )
        if self.full and failing:
            self.failures += 1
            raise sqlite3.OperationalError(DISK_FULL)
        return self.real.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def sqlite_store(store: object) -> SqliteStore:
    """The SqliteStore under any wrappers (the metrics' TimedStore keeps it as ``inner``)."""
    while not isinstance(store, SqliteStore):
        store = getattr(store, "inner")  # noqa: B009 - wrappers are not typed as such
    return store


def integrity_ok(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        db.close()


async def health(target: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        return int(reply.status)


async def test_an_injected_full_disk_refuses_cleanly_and_recovers(tmp_path: Path) -> None:
    history = History()
    sessions = [f"d{i}" for i in range(BUDGET.sessions)]
    async with running(tmp_path, default_policy="none", store_probe_interval_s=0.1) as sidecar:
        target = address(sidecar)
        store = sqlite_store(sidecar.engine.store)
        assert store._writer is not None
        disk = FillingDisk(store._writer.connection._connection)  # type: ignore[arg-type]
        store._writer.connection._connection = disk  # type: ignore[assignment]
        await create_sessions(target, sessions)
        clients = clients_for(target, history, sessions=sessions, clients=6, seed=3)
        refused_while_full = 0
        async with grpc.aio.insecure_channel(target) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            async with background(clients):
                await asyncio.sleep(0.5)
                disk.full = True
                for n in range(20):  # a prober that never retries: its refusals are final
                    event = event_pb2.Event(id=f"probe-{n}", role=event_pb2.ROLE_USER, text="x")
                    request = pb.AppendEventsRequest(session_id=sessions[0], events=[event])
                    history.send(sessions[0], [event.id])
                    with pytest.raises(grpc.aio.AioRpcError) as info:
                        await stub.AppendEvents(request, timeout=10)
                    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
                    assert DISK_FULL in (info.value.details() or "")
                    history.refuse(sessions[0], [event.id])
                    refused_while_full += 1
                    await asyncio.sleep(0.02)
                # The probe writes a heartbeat row: a full disk takes the server out of
                # rotation although reads still work.
                during = await health(target)
                disk.full = False
                await asyncio.sleep(0.6)  # load after recovery: the clients' retries land
            after = await health(target)
            log = await read_log(stub, sessions[0])
            assert not {e.id for e in log} & history.refused.get(sessions[0], set())
        report = await check_history(target, history, tmp_path / "sidecar.db")
    integrity_ok(tmp_path / "sidecar.db")
    assert disk.failures > 0
    assert history.unavailable > 0
    assert during == health_pb2.HealthCheckResponse.NOT_SERVING
    assert after == health_pb2.HealthCheckResponse.SERVING
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(during)
    print(f"injected full disk: health during the fault = {name}")
    FIGURES["disk_full_rejections"] += refused_while_full + history.unavailable
    FIGURES["histories_checked"] += report.sessions
    FIGURES["operations_checked"] += report.operations
    FIGURES["acknowledged_events"] += report.acknowledged


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs at {path}: {result.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path) -> None:
    """Write a ballast file until the filesystem is full.

    Unbuffered, so the write that meets the full disk leaves nothing behind in
    a buffer for the close to fail on again (as a buffered file did whenever
    the free space was not a multiple of the chunk).
    """
    with path.open("wb", buffering=0) as ballast:
        chunk = b"\0" * 65536
        try:
            while True:
                ballast.write(chunk)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        # The last write fits partly, or not at all: fill what a smaller one still can.
        for size in (4096, 512, 1):
            try:
                while True:
                    ballast.write(b"\0" * size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise


IN_NAMESPACE = "SIDECAR_TESTS_IN_MOUNT_NAMESPACE"
"""Set for the run of a test repeated inside a user and mount namespace of its own."""


def repeat_as_namespace_root(request: pytest.FixtureRequest) -> None:
    """Run this test again, alone, as root of a new user and mount namespace; it must pass."""
    done = subprocess.run(
        [
            *("unshare", "--user", "--map-root-user", "--mount"),
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            request.node.nodeid,
        ],
        cwd=request.config.rootpath,
        env={**os.environ, IN_NAMESPACE: "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = f"in a user and mount namespace:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert done.returncode == 0, output
    assert "1 passed" in done.stdout, output


async def test_a_real_full_tmpfs_refuses_cleanly_and_recovers(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if os.geteuid() != 0 and IN_NAMESPACE not in os.environ:
        await asyncio.to_thread(repeat_as_namespace_root, request)
        return
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        db_path = disk / "sidecar.db"
        history = History()
        refused = 0
        async with running(
            tmp_path,
            store=f"sqlite:///{db_path}",
            default_policy="none",
            store_probe_interval_s=0.1,
        ) as sidecar:
            target = address(sidecar)
            await create_sessions(target, ["full"])
            async with grpc.aio.insecure_channel(target) as channel:
                stub = pb_grpc.CompactionServiceStub(channel)

                async def append(n: int) -> grpc.StatusCode:
                    event = event_pb2.Event(
                        id=f"e{n}", role=event_pb2.ROLE_USER, text=f"{n} " + "word " * 20_000
                    )
                    history.send("full", [event.id])
                    try:
                        reply = await stub.AppendEvents(
                            pb.AppendEventsRequest(session_id="full", events=[event]), timeout=10
                        )
                    except grpc.aio.AioRpcError as error:
                        history.refuse("full", [event.id])
                        return error.code()
                    from tests.reliability.history import Op

                    history.record(Op("c", "full", "append", 0, 0, reply.version, (event.id,)))
                    return grpc.StatusCode.OK

                assert await append(0) == grpc.StatusCode.OK
                fill(disk / "ballast")
                codes = [await append(n) for n in range(1, 40)]
                refused = sum(1 for c in codes if c != grpc.StatusCode.OK)
                assert refused > 0, "the disk never filled up"
                assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}, codes
                await asyncio.sleep(0.3)
                during = await health(target)
                name = health_pb2.HealthCheckResponse.ServingStatus.Name(during)
                print(f"full tmpfs: {refused} of {len(codes)} appends refused, health {name}")
                (disk / "ballast").unlink()
                assert await append(100) == grpc.StatusCode.OK  # space is back
                assert await append(101) == grpc.StatusCode.OK
            report = await check_history(target, history, db_path)
        integrity_ok(db_path)
    assert report.acknowledged >= 3
    FIGURES["disk_full_rejections"] += refused
    FIGURES["histories_checked"] += report.sessions
