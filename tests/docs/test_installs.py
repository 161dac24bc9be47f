"""Each client installs the way its README says, and its example runs from that install.

None of the four is published to a registry; each README says how to install
from a checkout instead, and these tests do exactly that, in fresh folders:

- Python: a wheel built with ``python -m build`` into a fresh venv, then the
  sdist built beside it over that install, and the README's ``pip install .``
  into another fresh venv; after each, the venv's ``compaction-sidecar serve``
  answers the Ten lines example (run with that venv's interpreter);
- TypeScript: ``npm pack`` output installed into a fresh Node project;
- Go: a fresh module that finds the client through a ``replace`` directive;
- Java: ``mvn install`` into the local Maven repository, then a fresh project.

In the TypeScript, Go and Java projects the top README's example of that
client runs too, after the client README's own, put where the README says
(``example.mts``, ``main.go``, ``Example.java``) and run the same way.

The install steps run outside the server's network namespace (they download
dependencies); the examples inside it, against ``make serve``. The checkout's
own files are copied first (tracked and untracked, not ignored ones), so that
builds write nothing into the shared work tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.conformance.runner import serve
from tests.docs.catalogue import (
    GO_ERRORS,
    GO_INSTALL,
    GO_RUN,
    GO_TEN_LINES,
    JAVA_BUILD,
    JAVA_ERRORS,
    JAVA_INSTALL,
    JAVA_POM,
    JAVA_RUN,
    JAVA_TEN_LINES,
    PYTHON_INSTALL,
    PYTHON_TEN_LINES,
    README_GO,
    README_JAVA,
    README_TS,
    TS_EXAMPLE,
    TS_INSTALL,
    TS_PACK,
    TS_RUN,
)
from tests.docs.markdown import ROOT
from tests.docs.servers import PrivateNetwork, make_serve

# The pinned dependencies of the built distribution, downloaded once per .venv, so that
# a fresh venv installs from them without the index (as fast as an install can be).
WHEELHOUSE = ROOT / ".venv" / "wheelhouse"
BUILD_BACKEND = "setuptools==80.9.0"  # pyproject.toml's build-system, for the sdist


def copy_checkout(tmp: Path, *folders: str) -> Path:
    """The work tree's files under ``folders`` (all of it when none), copied to ``tmp``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *folders],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return tmp


def sh(script: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    """``script`` in bash, failing on its first failing command; its output."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def in_network(network: PrivateNetwork, script: str, cwd: Path, env: dict[str, str]) -> str:
    done = network.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}\n{network.log}"
    return done.stdout


# -- Python ---------------------------------------------------------------------------------


def fill_wheelhouse(wheel: Path) -> None:
    """Every requirement of ``wheel`` (and the build backend) in WHEELHOUSE, fetched once."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        pins = sorted(
            line for line in archive.read(metadata).decode().splitlines() if "Requires-Dist" in line
        )
    stamp = WHEELHOUSE / ".pins"
    wanted = "\n".join([BUILD_BACKEND, *pins])
    if stamp.exists() and stamp.read_text() == wanted:
        return
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(WHEELHOUSE)]
    subprocess.run([*pip, str(wheel), BUILD_BACKEND], check=True, timeout=600)
    stamp.write_text(wanted)


def fresh_venv(where: Path) -> dict[str, str]:
    """A new, empty venv and the environment of a shell that activated it, index-less.

    It gets no pip of its own (bootstrapping one costs seconds): the ``pip`` on
    the PATH is this interpreter's, pointed at the venv by ``PIP_PYTHON``, so it
    installs into the venv what the venv's own pip would.
    """
    venv.create(where, with_pip=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(
        [str(where / "bin"), str(Path(sys.executable).parent), env["PATH"]]
    )
    env["PIP_PYTHON"] = str(where / "bin" / "python")
    env["PIP_NO_INDEX"] = "1"  # what the index would give, from the pins already fetched
    env["PIP_FIND_LINKS"] = str(WHEELHOUSE)
    return env


def serves_the_ten_lines(where: Path, env: dict[str, str], tmp: Path) -> None:
    """The venv's ``compaction-sidecar serve`` answers the Ten lines, run by its python."""
    script = tmp / "example.py"
    script.write_text(PYTHON_TEN_LINES.text)
    with serve(str(where / "bin" / "compaction-sidecar"), []) as server:
        done = subprocess.run(
            [str(where / "bin" / "python"), str(script)],
            env={**env, "COMPACTION_ADDR": server.address},
            cwd=tmp,  # not the checkout: the installed package, not the sources
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert "It ships today." in done.stdout


def test_the_python_distribution_installs_from_wheel_sdist_and_checkout_and_serves(
    tmp_path: Path,
) -> None:
    checkout = copy_checkout(tmp_path / "checkout")
    dist = tmp_path / "dist"
    # build's default: the sdist, then the wheel built from that sdist
    sh(f"{sys.executable} -m build --outdir {dist} .", checkout)
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    fill_wheelhouse(wheel)
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        extras = {
            line.split(":", 1)[1].strip()
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Provides-Extra:")
        }
    assert {"adk", "langchain", "otel"} <= extras  # what the READMEs tell to install

    def install(name: str, cwd: Path, *commands: str) -> None:
        """Each command in turn into one fresh venv; after each, the venv serves."""
        where = tmp_path / name
        env = fresh_venv(where)
        for number, command in enumerate(commands):
            sh(command, cwd, env)
            run_in = tmp_path / f"{name}-run-{number}"
            run_in.mkdir()
            serves_the_ten_lines(where, env, run_in)

    with ThreadPoolExecutor(2) as pool:
        jobs = [
            # the wheel into a fresh venv, then the sdist over it (built and installed alone)
            pool.submit(
                install,
                "from-dist",
                tmp_path,
                f"pip install --quiet {wheel}",
                f"pip install --quiet --force-reinstall --no-deps {sdist}",
            ),
            pool.submit(install, "from-checkout", checkout, PYTHON_INSTALL.text),
        ]
        for job in jobs:
            job.result()


# -- TypeScript -----------------------------------------------------------------------------


def test_the_typescript_client_installs_from_npm_pack_and_its_example_runs(
    tmp_path: Path,
) -> None:
    checkout = copy_checkout(tmp_path / "checkout", "clients/typescript")
    env = {**os.environ, "CHECKOUT": str(checkout)}
    sh(TS_PACK.text, checkout / "clients/typescript", env)
    project = tmp_path / "my-agent"
    project.mkdir()
    sh("npm init -y >/dev/null", project, env)  # the user's own project
    sh(TS_INSTALL.text, project, env)
    # what the README expects a TypeScript project to have
    sh("npm install --no-audit --no-fund -D typescript@5.9.3 @types/node@20.19.43", project, env)
    (project / "example.mts").write_text(TS_EXAMPLE.text)
    with make_serve(tmp_path / "server") as network:
        in_network(network, TS_RUN.text, project, env)
        in_network(network, TS_RUN.text, project, env)  # re-run: the session is there
        (project / "example.mts").write_text(README_TS.text)  # the top README's, run the same way
        readme = in_network(network, TS_RUN.text, project, env)
    assert "[ 'Where is my order?', 'It ships today.' ]" in readme
    installed = project / "node_modules/@compaction-sidecar/client"
    assert (installed / "dist/src/index.js").is_file()
    assert not installed.is_symlink()  # the tarball's files, not a link to the checkout


# -- Go -------------------------------------------------------------------------------------

GO_ERRORS_PROGRAM = """package main

import (
\t"context"
\t"errors"
\t"log"

\t"github.com/compaction-sidecar/compaction-sidecar/clients/go/compaction"
\tpb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// The README's fragment, as printed, given what it names: a session, events, a stale version.
func appendAt(ctx context.Context, chat *compaction.Session, events []*pb.Event, v int64) {
%s}

func main() {
\tctx := context.Background()
\tclient, err := compaction.Dial(ctx, "127.0.0.1:50051")
\tif err != nil {
\t\tlog.Fatal(err)
\t}
\tdefer client.Close()
\tappendAt(ctx, client.Session("chat-go"), []*pb.Event{compaction.User("and now?")}, 1)
}
"""


def test_the_go_client_is_used_from_a_fresh_module_through_a_replace(tmp_path: Path) -> None:
    project = tmp_path / "agent"
    project.mkdir()
    (project / "main.go").write_text(GO_TEN_LINES.text)
    (project / "readme_errors").mkdir()
    (project / "readme_errors/main.go").write_text(GO_ERRORS_PROGRAM % GO_ERRORS.text)
    # Go writes nothing into a replaced folder: the checkout itself is used
    env = {**os.environ, "CHECKOUT": str(ROOT)}
    sh(GO_INSTALL.text, project, env)
    sh("go build ./... && gofmt -l main.go | (! grep .)", project, env)  # main.go: gofmt clean
    with make_serve(tmp_path / "server") as network:
        first = in_network(network, GO_RUN.text, project, env)
        again = in_network(network, GO_RUN.text, project, env)  # re-run: the session is there
        in_network(network, "go run ./readme_errors", project, env)
        (project / "main.go").write_text(README_GO.text)  # the top README's, run the same way
        sh("gofmt -l main.go | (! grep .)", project, env)
        readme = in_network(network, GO_RUN.text, project, env)
    assert "found: Where is my order?" in first
    assert "stored at version" in again
    assert readme == "Where is my order?\nIt ships today.\n"


# -- Java -----------------------------------------------------------------------------------

JAVA_ERRORS_PROGRAM = """import dev.compactionsidecar.client.AppendOptions;
import dev.compactionsidecar.client.Events;
import dev.compactionsidecar.client.SessionHandle;
import dev.compactionsidecar.client.SidecarClient;
import dev.compactionsidecar.client.SidecarException;
import dev.compactionsidecar.v1.Event;
import io.grpc.Status;
import java.util.List;

/** The README's fragment, as printed, given what it names: a session and an event. */
public class ReadmeErrors {
  static void appendAt(SessionHandle chat, Event event) {
%s  }

  public static void main(String[] args) {
    try (SidecarClient client = SidecarClient.builder("127.0.0.1:50051").build()) {
      appendAt(client.session("chat-java"), Events.user("and now?"));
    }
  }
}
"""


def test_the_java_client_installs_into_the_local_maven_repository_and_its_example_runs(
    tmp_path: Path,
) -> None:
    checkout = copy_checkout(tmp_path / "checkout", "clients/java")
    env = {**os.environ, "CHECKOUT": str(checkout)}
    sh(JAVA_INSTALL.text, tmp_path, env)
    project = tmp_path / "agent"
    sources = project / "src/main/java"
    sources.mkdir(parents=True)
    (project / "pom.xml").write_text(JAVA_POM.text)  # the README's, as printed
    (sources / "Example.java").write_text(JAVA_TEN_LINES.text)
    (sources / "ReadmeErrors.java").write_text(JAVA_ERRORS_PROGRAM % JAVA_ERRORS.text)
    sh(JAVA_BUILD.text, project, env)
    with make_serve(tmp_path / "server") as network:
        first = in_network(network, JAVA_RUN.text, project, env)
        in_network(network, JAVA_RUN.text, project, env)  # re-run: the session is there
        errors = JAVA_RUN.text.replace(" Example", " ReadmeErrors")
        assert errors != JAVA_RUN.text
        in_network(network, errors, project, env)
        (sources / "Example.java").write_text(README_JAVA.text)  # the top README's, the same way
        sh(JAVA_BUILD.text, project, env)
        readme = in_network(network, JAVA_RUN.text, project, env)
    assert readme == "Where is my order?\nIt ships today.\n"
    assert "2 answers" in first
    assert "2 events in the context" in first
