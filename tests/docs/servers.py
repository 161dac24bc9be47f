"""``make serve``, started as the README starts it, in a network namespace of its own.

The documents' examples talk to ``127.0.0.1:50051``, the address ``make serve``
listens on. Run on a shared machine, that port may be anyone's; in a private
network namespace (loopback only) it is always this server's, so the examples
run exactly as printed. The namespace belongs to a user namespace of its own
(``unshare --user --map-root-user --net``), so an ordinary user makes it as
root does: no privilege is needed, only the kernel's unprivileged user
namespaces (on by default on Debian and Ubuntu; where they are off the tests
fail, they do not skip). Commands run inside it through ``nsenter``; they reach
nothing but that loopback, so whatever needs the network (installs, module
downloads) is done before, outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.docs.markdown import ROOT

ADDRESS = "127.0.0.1:50051"
GEMINI_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")
# What make serve and make grpcurl install, and a fresh shell does not have on its PATH.
CHECKOUT_BINS = (ROOT / ".venv" / "bin", ROOT / ".tools" / "bin")


def fresh_shell() -> dict[str, str]:
    """This environment with the checkout's ``.venv/bin`` and ``.tools/bin`` off the PATH.

    A user's shell in a fresh clone has neither: an example that needs one
    must say so in what it prints (``.venv/bin/python``, ``.tools/bin/grpcurl``).
    """
    installed = {d.resolve() for d in CHECKOUT_BINS}
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() not in installed]
    return {**os.environ, "PATH": os.pathsep.join(path)}


@dataclass(frozen=True, slots=True)
class PrivateNetwork:
    """The namespace ``make serve`` runs in; ``run`` runs a command there."""

    pid: int
    log: Path

    def run(self, command: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
        """``command`` inside the namespace, output captured as text; check it yourself."""
        options.setdefault("timeout", 120)
        return subprocess.run(
            [
                "nsenter",
                f"--user=/proc/{self.pid}/ns/user",
                f"--net=/proc/{self.pid}/ns/net",
                "--preserve-credentials",  # this user still, seen as root inside
                "--",
                *command,
            ],
            capture_output=True,
            text=True,
            check=False,
            **options,
        )


@contextmanager
def make_serve(tmp: Path, **settings: str) -> Iterator[PrivateNetwork]:
    """``make serve`` on 127.0.0.1:50051 of a fresh namespace, its database under ``tmp``.

    ``COMPACTION_STORE`` (a setting of docs/configuration.md) moves the database
    from the checkout's ./compaction.db to ``tmp``; ``settings`` are more of
    them, by their ``COMPACTION_*`` variables (``summarizer="none"``).
    """
    subprocess.run(["make", "-s", "runtime"], cwd=ROOT, check=True, timeout=600)  # may download
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / "make-serve.log"
    env = {
        # Without Gemini's credentials, as on a fresh machine: the default summarizer is then
        # the offline one, and no example calls a model.
        **{k: v for k, v in os.environ.items() if k not in GEMINI_VARIABLES},
        "COMPACTION_STORE": f"sqlite:///{tmp / 'compaction.db'}",
        **{f"COMPACTION_{name.upper()}": value for name, value in settings.items()},
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                *("unshare", "--user", "--map-root-user", "--net"),
                *("sh", "-c", "ip link set lo up && exec make -s serve"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
            start_new_session=True,  # make and the server it starts: one group to stop
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if f"listening on {ADDRESS}" not in line:
            raise RuntimeError(f"make serve did not start: {line!r}\n{log.read_text()}")
        yield PrivateNetwork(process.pid, log)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
