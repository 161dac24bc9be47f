"""The container image's command, run from a wheel in a fresh virtual environment.

No container engine runs here, so this builds what the Dockerfile builds: the
project's wheel from the image's build context (pyproject.toml, README.md,
sidecar/), installed with its dependencies into a new venv. Then it runs the
Dockerfile's ENTRYPOINT with the Dockerfile's ENV, as the image's uid when the
test runs as root, with nothing writable but the data and temp directories (the
venv read-only, HOME nonexistent): the server must come up SERVING on its health
port, store an append, write nothing into the venv, download nothing (the
tokenizer is in the wheel), and stop cleanly on SIGTERM. The example agent's
script from the chart then talks to it from the same venv.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.deploy.chart import ROOT, pod_specs, render, sidecar_container
from tests.deploy.serving import stop, wait_serving
from tests.server.harness import free_port

DOCKERFILE = ROOT / "Dockerfile"
IMAGE_UID = 65532
VENV_IN_IMAGE = "/opt/compaction"


@dataclass(frozen=True)
class Image:
    """What the Dockerfile's final stage sets: environment, user, entrypoint."""

    env: dict[str, str]
    user: str
    entrypoint: list[str]
    instructions: list[str]


def final_stage(dockerfile: Path) -> Image:
    """ENV, USER and ENTRYPOINT of the last stage (continuation lines joined)."""
    logical: list[str] = []
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        if logical and logical[-1].endswith("\\"):
            logical[-1] = logical[-1][:-1] + " " + line.strip()
        else:
            logical.append(line.strip())
    last_from = max(i for i, line in enumerate(logical) if line.upper().startswith("FROM "))
    env: dict[str, str] = {}
    user, entrypoint, instructions = "", [], []
    for line in logical[last_from:]:
        word, _, rest = line.partition(" ")
        instructions.append(word.upper())
        if word.upper() == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
        elif word.upper() == "USER":
            user = rest.strip()
        elif word.upper() == "ENTRYPOINT":
            entrypoint = json.loads(rest)
    return Image(env, user, entrypoint, instructions)


def test_dockerfile_runs_the_server_as_the_unprivileged_user() -> None:
    image = final_stage(DOCKERFILE)
    assert image.entrypoint == ["compaction-sidecar", "serve"]
    assert image.user == f"{IMAGE_UID}:{IMAGE_UID}"
    assert image.env["TIKTOKEN_CACHE_DIR"] == ""
    assert image.env["COMPACTION_STORE"] == "sqlite:////var/lib/compaction/compaction.db"
    assert "HEALTHCHECK" not in image.instructions  # Kubernetes probes the health port


@dataclass(frozen=True)
class Installed:
    root: Path  # traversable by the image's uid
    venv: Path


def _run(args: list[str], **kwargs: object) -> None:
    result = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    """The wheel built from the image's build context, installed into a fresh venv."""
    root = Path(tempfile.mkdtemp(prefix="image-command-"))
    root.chmod(0o755)  # the image's uid must reach the venv and its data directory
    try:
        context = root / "context"
        context.mkdir()
        for name in ("pyproject.toml", "README.md"):  # what .dockerignore lets in
            shutil.copy2(ROOT / name, context / name)
        shutil.copytree(
            ROOT / "sidecar", context / "sidecar", ignore=shutil.ignore_patterns("__pycache__")
        )
        wheels = root / "wheels"
        pip = ["--disable-pip-version-check", "--no-input", "--quiet"]
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                *pip,
                "--no-deps",
                "-w",
                str(wheels),
                str(context),
            ]
        )
        (wheel,) = wheels.glob("compaction_sidecar-*.whl")
        venv = root / "venv"
        _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(venv / "bin" / "pip"), "install", *pip, str(wheel)])
        if os.geteuid() != 0:
            _run(["chmod", "-R", "a-w", str(venv)])  # as root, the uid switch does this
        yield Installed(root, venv)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)


def runs_as_image_user(venv: Path) -> bool:
    """Whether the venv's interpreter runs as the image's uid here.

    Not when the base interpreter lives in a directory only root may enter (a
    pyenv under /root, as on the development machines): the test then runs the
    server as the current user, and the venv snapshot and the HOME check still
    catch any write outside the data and temp directories.
    """
    try:
        result = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sidecar.cli"],
            user=IMAGE_UID,
            group=IMAGE_UID,
            extra_groups=[],
            capture_output=True,
            check=False,
        )
    except PermissionError:
        return False
    return result.returncode == 0


def snapshot(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*")}


def test_image_command_serves_from_a_fresh_wheel_install(
    installed: Installed, tmp_path: Path
) -> None:
    image = final_stage(DOCKERFILE)
    data = installed.root / "data"
    tmp = installed.root / "tmp"
    data.mkdir()
    tmp.mkdir(mode=0o1777)
    tmp.chmod(0o1777)
    as_image_user = os.geteuid() == 0 and runs_as_image_user(installed.venv)
    if as_image_user:
        os.chown(data, IMAGE_UID, IMAGE_UID)
    api_port, health_port = free_port(), free_port()

    env = {
        name: value.replace(VENV_IN_IMAGE, str(installed.venv)) for name, value in image.env.items()
    }
    env["PATH"] = env["PATH"].replace("${PATH}", "/usr/bin:/bin")
    env.update(
        HOME="/nonexistent",
        TMPDIR=str(tmp),
        # The image's addresses and paths, moved onto this machine's loopback and temp dir.
        COMPACTION_LISTEN=f"127.0.0.1:{api_port}",
        COMPACTION_HEALTH_LISTEN=f"127.0.0.1:{health_port}",
        COMPACTION_STORE=f"sqlite:///{data / 'compaction.db'}",
    )
    assert shutil.which(image.entrypoint[0], path=env["PATH"]) == str(
        installed.venv / "bin" / "compaction-sidecar"
    )
    venv_before = snapshot(installed.venv)

    process = subprocess.Popen(
        image.entrypoint,
        env=env,
        cwd=data,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        user=IMAGE_UID if as_image_user else None,
        group=IMAGE_UID if as_image_user else None,
        extra_groups=[] if as_image_user else None,
    )
    try:
        wait_serving(f"127.0.0.1:{health_port}", process)
        with grpc.insecure_channel(f"127.0.0.1:{api_port}") as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            reply = stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id="image-check",
                    create_if_missing=True,
                    events=[event_pb2.Event(role=event_pb2.ROLE_USER, text="hello from the image")],
                ),
                timeout=10,
            )
            assert reply.version == 1
            assert reply.events[0].token_count > 0  # the bundled tokenizer counted it
        run_example_agent(installed.venv, f"127.0.0.1:{api_port}")
    finally:
        output = stop(process)
    assert process.returncode == 0, output
    assert (data / "compaction.db").is_file()
    assert snapshot(installed.venv) == venv_before, "the server wrote into its install"
    assert not (tmp / "data-gym-cache").exists(), "tiktoken cached or downloaded a file"
    assert not Path("/nonexistent").exists(), "the server created its HOME"


def run_example_agent(venv: Path, address: str) -> None:
    """The chart's example agent script, from the same install, appends until stopped."""
    pod = next(pod_specs(render(["sidecar-native.yaml"])))
    agent = sidecar_container(pod, "agent")
    assert agent["command"] == ["python", "-c"]
    process = subprocess.Popen(
        [str(venv / "bin" / "python"), "-c", agent["args"][0]],
        env={
            "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
            "COMPACTION_ADDR": address,
            "HOSTNAME": "example-agent-0",
            "INTERVAL_S": "0.1",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("appended ping 2:"):
                break
            assert len(lines) < 20, "".join(lines)
        assert lines[0] == "appended ping 0: session version 1\n", "".join(lines)
        assert lines[-1] == "appended ping 2: session version 3\n", "".join(lines)
    finally:
        process.kill()
        process.communicate()
