"""A throwaway PostgreSQL server for the tests: a cluster in a temporary directory.

PostgreSQL is installed on the CI machines but not running. ``PostgresServer``
runs ``initdb`` into a fresh directory and starts ``postgres`` on a free port
on 127.0.0.1, with fsync off (a crashed test cluster is thrown away anyway).
It refuses to run as root, so under root the server binaries run as the
``postgres`` user through ``runuser``. ``stop`` / ``start`` restart the same
cluster on the same port (the restart tests use them).

Set ``COMPACTION_TEST_POSTGRES_DSN`` to use an existing server instead; the
tests then create and drop their own databases on it.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

_SUPERUSER = "postgres"


def free_port() -> int:
    """A port nothing listens on right now (for servers started as separate processes)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _bindir() -> Path:
    """Where initdb and postgres live: PG_BINDIR, then Debian's layout, then PATH."""
    if configured := os.environ.get("PG_BINDIR"):
        return Path(configured)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]))
    if versions:
        return Path(versions[-1])
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError(
            "PostgreSQL server binaries not found: install PostgreSQL 13+ (initdb, postgres),"
            " set PG_BINDIR, or set COMPACTION_TEST_POSTGRES_DSN to an existing server"
        )
    return Path(initdb).parent


class PostgresServer:
    """One private cluster: ``start()``, ``dsn(database)``, ``stop()``, ``destroy()``."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="compaction-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.running = False
        self._as_root = os.geteuid() == 0

    def _command(self, *argv: str) -> list[str]:
        return ["runuser", "-u", _SUPERUSER, "--", *argv] if self._as_root else list(argv)

    def init(self) -> None:
        self.sockets.mkdir()
        if self._as_root:
            shutil.chown(self.root, _SUPERUSER)
            shutil.chown(self.sockets, _SUPERUSER)
            os.chmod(self.root, 0o700)
        subprocess.run(
            self._command(
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                _SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def start(self, timeout_s: float = 60.0) -> None:
        """Start (or restart) the cluster on its port and wait until it accepts connections."""
        options = " ".join(
            [
                f"-p {self.port}",
                "-h 127.0.0.1",
                f"-k {self.sockets}",
                # A test cluster is thrown away after a crash: no need to flush.
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=300",
            ]
        )
        self._pg_ctl("start", "-l", str(self.log), "-o", options, "-t", str(int(timeout_s)))
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the cluster; ``fast`` disconnects clients, as a restart or failover does."""
        if self.running:
            self._pg_ctl("stop", "-m", mode)
            self.running = False

    def _pg_ctl(self, action: str, *args: str) -> None:
        done = subprocess.run(
            self._command(str(self.bindir / "pg_ctl"), action, "-D", str(self.data), "-w", *args),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"pg_ctl {action} failed: {done.stdout}{done.stderr}\n{tail}")

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{_SUPERUSER}@127.0.0.1:{self.port}/{database}"
