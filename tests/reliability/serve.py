"""``compaction-sidecar serve`` as a child process, to kill and restart.

The process is started with ``python -m sidecar.cli serve`` (the same entry
point as the console script) on a fixed port, so clients keep one address
across restarts. Its output goes to a log file, never to a pipe that could
fill up and block it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ServeProcess:
    """One ``serve`` child over ``db_path``; ``start``/``kill``/``stop`` may repeat."""

    db_path: Path
    port: int
    log_path: Path
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        """Start and wait until health answers SERVING."""
        assert self.process is None or self.process.poll() is not None
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sidecar.cli",
                    "serve",
                    "--listen",
                    self.address,
                    "--store",
                    f"sqlite:///{self.db_path}",
                    "--shutdown-grace-s",
                    "1",
                    "--default-policy",
                    "none",
                    *self.extra,
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}: {self.tail()}")
            if self.serving():
                return
            time.sleep(0.05)
        raise RuntimeError(f"serve did not come up in {timeout_s} s: {self.tail()}")

    def serving(self) -> bool:
        with grpc.insecure_channel(self.address) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=0.5
                )
            except grpc.RpcError:
                return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no close, no checkpoint."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        assert self.process.returncode == -signal.SIGKILL

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL if it hangs)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]
