"""The image built and run, and the chart's pods run, with podman.

Run by `make deploy-test` (scripts/deploy/deploy_test.sh sets CONTAINERS_CONF and
PYTHONPATH). Every step has a time limit; every container, pod and volume it starts
it removes, on failure too. What podman cannot run of the chart is printed by name.
DEPLOY_TEST_REUSE_IMAGE=1 keeps an image already built (for working on this file).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sidecar.client import Client
from sidecar.model import Event, Role

ROOT = Path(__file__).resolve().parents[2]
HELM = str(ROOT / ".tools" / "bin" / "helm")
BASE_IMAGE = os.environ.get("DEPLOY_TEST_BASE_IMAGE", "localhost/compaction-base:bookworm")
IMAGE = "compaction-sidecar:0.1.0"
NAME = "compaction-deploy-test"
GRACE_S = 5
UID = "65532"
# Parts of the chart podman kube play does not run (podman 4.3, Debian bookworm).
PODMAN_CANNOT = {
    "native sidecars": "init containers with restartPolicy: Always (sidecar.native=true)",
    "grpc probes": "startupProbe, readinessProbe and livenessProbe of type grpc"
    " (the health port is checked here with a gRPC Health client instead)",
}
cleanups: list[Callable[[], None]] = []


def step(message: str) -> None:
    print(f"deploy-test: {message}", flush=True)


def run(*args: str, timeout: float = 120, check: bool = True, stdin: str | None = None) -> str:
    """A command with a time limit; its output, or a failure naming it."""
    result = subprocess.run(
        args, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise SystemExit(f"deploy-test: {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    return run("podman", *args, timeout=timeout, check=check)


def container_logs(name: str) -> str:
    """stdout and stderr of a container (the server logs to stderr)."""
    result = subprocess.run(
        ["podman", "logs", name], capture_output=True, text=True, timeout=30, check=False
    )
    return result.stdout + result.stderr


def until(what: str, condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise SystemExit(f"deploy-test: {what}: not after {timeout_s}s")


def health(address: str, service: str = "") -> int | None:
    """The health status on ``address``; None when nothing answers."""
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=2
            )
        except grpc.RpcError:
            return None
    return int(reply.status)


SERVING = health_pb2.HealthCheckResponse.SERVING


def build() -> None:
    if os.environ.get("DEPLOY_TEST_REUSE_IMAGE") and podman("images", "-q", IMAGE).strip():
        step(f"image {IMAGE} reused (DEPLOY_TEST_REUSE_IMAGE)")
        return
    images = podman("images", "--format", "{{.Repository}}:{{.Tag}}")
    if BASE_IMAGE not in images.split():
        started = time.monotonic()
        run("bash", "scripts/deploy/base_image.sh", timeout=900)
        step(f"base image {BASE_IMAGE} from Debian's packages in {time.monotonic() - started:.0f}s")
    started = time.monotonic()
    env_image = run(
        "env",
        f"BASE_IMAGE={BASE_IMAGE}",
        "ENGINE=podman",
        "bash",
        "scripts/deploy/image.sh",
        timeout=900,
    )
    size = [line for line in env_image.splitlines() if " MB" in line]
    step(f"image built in {time.monotonic() - started:.0f}s; {size[-1] if size else ''}")
    # The image runs this tree's code, not a layer cached from an earlier build.
    digest = (
        "import hashlib, pathlib, sidecar\n"
        "root = pathlib.Path(sidecar.__file__).parent\n"
        "files = sorted(p for p in root.rglob('*.py'))\n"
        "print(hashlib.sha256(b''.join(p.read_bytes() for p in files)).hexdigest())"
    )
    inside = podman("run", "--rm", "--entrypoint", "python3", IMAGE, "-c", digest).strip()
    here = hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted((ROOT / "sidecar").rglob("*.py")))
    ).hexdigest()
    assert inside == here, "the image does not hold this tree's sidecar package"
    step("image: holds this tree's sidecar package")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def container(volume: str) -> Iterator[tuple[str, str]]:
    """The image run as the issue asks; its API and health addresses on the host."""
    api, hc = free_port(), free_port()
    podman(
        "run", "--detach", "--name", NAME, "--read-only", "--tmpfs", "/tmp",
        "--volume", f"{volume}:/var/lib/compaction", "--user", f"{UID}:{UID}",
        "--publish", f"127.0.0.1:{api}:50051", "--publish", f"127.0.0.1:{hc}:50052",
        IMAGE, f"--shutdown-grace-s={GRACE_S}",
    )  # fmt: skip
    try:
        until("health SERVING", lambda: health(f"127.0.0.1:{hc}") == SERVING, 90)
        yield f"127.0.0.1:{api}", f"127.0.0.1:{hc}"
    finally:
        podman("rm", "--force", "--time", "0", NAME, check=False)


def image_run() -> None:
    volume = f"{NAME}-data"
    podman("volume", "create", volume)
    cleanups.append(lambda: podman("volume", "rm", "--force", volume, check=False) and None)
    with container(volume) as (api, hc):
        inspect = podman(
            "inspect", NAME, "--format", "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}"
        ).split()
        assert inspect == [f"{UID}:{UID}", "true"], inspect
        uid = podman("exec", NAME, "python", "-c", "import os; print(os.getuid())").strip()
        assert uid == UID, uid
        denied = subprocess.run(
            ["podman", "exec", NAME, "touch", "/opt/compaction/x"],
            capture_output=True, timeout=60, check=False,
        )  # fmt: skip
        assert denied.returncode != 0, "the root file system is writable"
        assert health(hc, "liveness") == SERVING
        with Client(api) as client:
            session = client.session("deploy-test")
            texts = [f"event {n}" for n in range(5)]
            for text in texts:
                session.append([Event(id="", role=Role.USER, text=text)], create_if_missing=True)
            assert [e.text for e in session.events()] == texts
        step("image: read-only root, /tmp tmpfs, named volume, uid 65532; 5 appends read back")
        started = time.monotonic()
        podman("kill", "--signal", "TERM", NAME)
        code = podman("wait", NAME, timeout=GRACE_S + 30).strip()
        took = time.monotonic() - started
        assert code == "0", f"exit status {code}: {container_logs(NAME)}"
        assert took <= GRACE_S + 2, f"SIGTERM to exit took {took:.1f}s (grace {GRACE_S}s)"
        step(f"image: SIGTERM, exited 0 in {took:.1f}s (--shutdown-grace-s={GRACE_S})")
        podman("rm", "--force", NAME)
    with container(volume) as (api, _), Client(api) as client:
        assert [e.text for e in client.session("deploy-test").events()] == texts
    step("image: a new container on the volume reads every acknowledged event")


def render(*sets: str) -> list[dict[str, Any]]:
    chart = str(ROOT / "helm" / "compaction-sidecar")
    flags = [a for s in sets for a in ("--set", s)]
    out = run(HELM, "template", "rel", chart, "--kube-version=1.29.0", *flags)
    return [d for d in yaml.safe_load_all(out) if d]


def podman_runnable(docs: list[dict[str, Any]]) -> str:
    """The Deployments, as podman kube play runs them: what it cannot run removed, by name."""
    kept = []
    for doc in docs:
        if doc["kind"] != "Deployment":
            step(f"podman kube play does not run {doc['kind']} {doc['metadata']['name']}")
            continue
        doc["spec"]["replicas"] = 1
        spec = doc["spec"]["template"]["spec"]
        assert not spec.get("initContainers"), "native sidecar rendered"
        for c in spec["containers"]:
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if "grpc" in c.pop(probe, {}):
                    pass
        kept.append(doc)
    return yaml.safe_dump_all(kept)


@contextmanager
def kube_play(manifest: str) -> Iterator[None]:
    path = Path(tempfile.mkdtemp()) / "kube.yaml"
    path.write_text(manifest)
    down = lambda: podman("kube", "down", str(path), timeout=120, check=False) and None  # noqa: E731
    cleanups.append(down)
    podman("kube", "play", "--network", "bridge", str(path), timeout=180)
    try:
        yield
    finally:
        down()


def containers_of(pod: str) -> dict[str, str]:
    out = podman("ps", "--all", "--filter", f"pod={pod}", "--format", "{{.Names}} {{.ID}}")
    return dict(line.split() for line in out.splitlines() if line.strip())


def sidecar_pod() -> None:
    for name, what in PODMAN_CANNOT.items():
        step(f"podman cannot run {name}: {what}")
    docs = render(
        "exampleAgent.enabled=true",
        "sidecar.native=false",
        "exampleAgent.intervalSeconds=1",
        f"server.shutdownGraceSeconds={GRACE_S}",
    )
    pod = next(d for d in docs if d["kind"] == "Deployment")["metadata"]["name"] + "-pod-0"
    with kube_play(podman_runnable(docs)):
        names = containers_of(pod)
        step(f"pod {pod}: containers {sorted(names)}")
        agent = next(n for n in names if n.endswith("-agent"))
        sidecar = next(n for n in names if n.endswith("-compaction-sidecar"))
        logs = lambda: podman("logs", agent, check=False)  # noqa: E731
        until("three appends by the agent", lambda: logs().count("appended ping") >= 3, 120)
        first = logs().strip().splitlines()[0]
        assert first.startswith("appended ping 0"), f"the agent's first append: {first}"
        # The agent's session is its HOSTNAME: the pod's name, which the pod's containers share.
        read = (
            "import socket; from sidecar.client import Client\n"
            "with Client('127.0.0.1:50051') as c:\n"
            "    print(len(list(c.session(socket.gethostname()).events())))"
        )
        stored = podman("exec", sidecar, "python", "-c", read)
        assert int(stored) >= 3, stored
        step(f"sidecar pod: the agent's first append landed; {int(stored)} events read back")
        started = time.monotonic()
        podman("pod", "stop", "--time", str(GRACE_S + 5), pod, timeout=GRACE_S + 60)
        took = time.monotonic() - started
        for name in (agent, sidecar):
            code = podman("inspect", name, "--format", "{{.State.ExitCode}}").strip()
            assert code == "0", f"{name} exited {code}: {container_logs(name)}"
        step(f"sidecar pod: stopped in {took:.1f}s, agent and sidecar exited 0")


def service_mode() -> None:
    docs = render("mode=service", "store.postgres.existingSecret=pg", "replicaCount=1")
    step("service mode: no PostgreSQL here; its DSN is a port nothing listens on")
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        for c in doc["spec"]["template"]["spec"]["containers"]:
            for env in c["env"]:
                if env["name"] == "COMPACTION_STORE":
                    env.pop("valueFrom")
                    env["value"] = "postgresql://u:p@127.0.0.1:1/db"
    pod = next(d for d in docs if d["kind"] == "Deployment")["metadata"]["name"] + "-pod-0"
    with kube_play(podman_runnable(docs)):
        (server,) = [n for n in containers_of(pod) if not n.endswith("-infra")]
        logs = lambda: container_logs(server)  # noqa: E731
        until("the server waiting for its store", lambda: "store unavailable" in logs(), 90)
        probe = (
            "import grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g\n"
            "with grpc.insecure_channel('127.0.0.1:50052') as ch:\n"
            "    try: g.HealthStub(ch).Check(h.HealthCheckRequest(), timeout=2)\n"
            "    except grpc.RpcError as e: print(e.code().name)"
        )
        answer = podman("exec", server, "python", "-c", probe, timeout=60).strip()
        assert answer == "UNAVAILABLE", answer  # the startup probe fails: the pod is never ready
        state = podman("inspect", server, "--format", "{{.State.Status}}").strip()
        assert state == "running", state
        step("service mode: the pod runs, retrying its store; health not answered, so not ready")
        started = time.monotonic()
        podman("pod", "stop", "--time", str(GRACE_S + 5), pod, timeout=GRACE_S + 60)
        code = podman("inspect", server, "--format", "{{.State.ExitCode}}").strip()
        took = time.monotonic() - started
        # Waiting for its store, the server as PID 1 still acts on SIGTERM at once (its
        # handlers are set before the store is opened), rather than being killed at the
        # end of the stop timeout (exit 137).
        assert code == "0", (code, took)
        assert took < GRACE_S + 5, (code, took)
        step(f"service mode: SIGTERM while waiting for the store, exited 0 in {took:.1f}s")


def main() -> None:
    started = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("deploy-test: stopped"))
    try:
        build()
        image_run()
        sidecar_pod()
        service_mode()
    finally:
        for cleanup in reversed(cleanups):
            cleanup()
        podman("rm", "--force", "--time", "0", NAME, check=False)
    step(f"passed in {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
