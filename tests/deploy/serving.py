"""A server run as a process: wait for its health to say SERVING, stop it as the kubelet does."""

from __future__ import annotations

import signal
import subprocess
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc


def wait_serving(address: str, process: subprocess.Popen[str], timeout_s: float = 60.0) -> None:
    """Until the health service on ``address`` is SERVING; a test failure if the process exits."""
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                output = "\n".join(part for part in process.communicate() if part)
                pytest.fail(f"server exited {process.returncode}:\n{output}")
            try:
                status = stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
            except grpc.RpcError:
                time.sleep(0.2)
                continue
            if status == health_pb2.HealthCheckResponse.SERVING:
                return
            time.sleep(0.2)
    pytest.fail(f"health on {address} not SERVING after {timeout_s}s")


def stop(process: subprocess.Popen[str], timeout_s: float = 30.0) -> str:
    """SIGTERM, then SIGKILL after ``timeout_s``; what the process wrote."""
    process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return "\n".join(part for part in (out, err) if part)
