"""``compaction-sidecar inspect`` against a live server."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

from sidecar.client import AsyncClient, Tls
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.inspect import ORDER_NOTE, placed_before
from sidecar.model import Event, Role
from tests.compaction.fakes import FakeSummarizer
from tests.server.harness import address, running
from tests.tls import self_signed


async def run_inspect(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sidecar.cli",
        "inspect",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_inspect_shows_kept_archived_and_summary_events(tmp_path: Path) -> None:
    async with running(tmp_path, summarizer=FakeSummarizer("what happened so far")) as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            await client.create_session(
                "chat",
                CompactionPolicy(
                    None, Summarize(2, 1, shadow_prompt="Summary", max_summary_tokens=1)
                ),
            )
            session = client.session("chat")
            for n in range(4):
                await session.append(
                    [
                        Event(id=f"u{n}", role=Role.USER, text=f"question {n}"),
                        Event(id=f"a{n}", role=Role.ASSISTANT, text=f"answer {n}"),
                    ]
                )
            assert (await session.compact(force=True)).compacted
        code, out = await run_inspect("chat", "--addr", address(sidecar))
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0].startswith("session chat  version ")
        assert any(line.startswith("-") and "User: question 0" in line for line in lines)
        assert any(line.startswith("S") and "what happened so far" in line for line in lines)
        assert any(line.startswith(" ") and "User: question 3" in line for line in lines)
        # The summary turn (written at 9 and 10) is listed above the kept window (7, 8):
        # the view says why, and where each such row was placed.
        assert ORDER_NOTE in out
        summary_rows = [line for line in lines if line.startswith("S")]
        assert len(summary_rows) == 2
        assert all(row.endswith("^ placed before pos 7") for row in summary_rows)
        assert sum(line.endswith("tok") for line in lines) == 10 - 2  # every other row unmarked
        code, out = await run_inspect("missing", "--addr", address(sidecar))
        assert code == 1
        assert "not found" in out


def _at(*positions: int) -> list[Event]:
    return [Event(id=f"e{p}", role=Role.USER, text="x", position=p) for p in positions]


def test_rows_written_after_rows_below_them_are_marked_with_where_they_were_placed() -> None:
    # two passes: summary 9-10 placed before 7, then summary 15-16 placed before 13
    log = _at(1, 2, 3, 4, 5, 6, 9, 10, 7, 8, 11, 12, 15, 16, 13, 14)
    assert placed_before(log) == {6: 7, 7: 7, 12: 13, 13: 13}


def test_a_log_in_write_order_has_no_placed_rows() -> None:
    assert placed_before(_at(1, 2, 3)) == {}
    assert placed_before([]) == {}


async def run_cli(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sidecar.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_inspect_shows_a_summarys_sources_the_history_and_restore_undoes_it(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, summarizer=FakeSummarizer("what happened so far")) as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            await client.create_session(
                "chat", CompactionPolicy(None, Summarize(2, 1, max_summary_tokens=1))
            )
            session = client.session("chat")
            for n in range(4):
                await session.append(
                    [
                        Event(id=f"u{n}", role=Role.USER, text=f"question {n}"),
                        Event(id=f"a{n}", role=Role.ASSISTANT, text=f"answer {n}"),
                    ]
                )
            landed = await session.compact(force=True)
        addr = ("--addr", address(sidecar))
        code, out = await run_cli("inspect", "chat", *addr)
        assert code == 0, out
        assert f"summary of 6 events archived by {landed.compaction_id}: u0 a0 u1 a1 u2 a2" in out
        code, out = await run_cli("inspect", "chat", "--compactions", *addr)
        assert code == 0, out
        (row,) = [line for line in out.splitlines() if landed.compaction_id in line]
        assert "summarize" in row
        assert "force" in row
        assert row.endswith("standing")
        code, out = await run_cli("restore", "chat", "no-such-one", *addr)
        assert code == 1
        assert (
            out == "compaction-sidecar restore: NOT_FOUND: compaction 'no-such-one' not found"
            " in session 'chat'\n"
        )
        code, out = await run_cli("restore", "chat", "--pause", *addr)
        assert code == 0, out
        assert out.startswith(f"restored chat: undid compaction {landed.compaction_id} (the ")
        assert "6 events back in the window, 2 summary events archived" in out
        async with AsyncClient(address(sidecar)) as client:
            context = await client.session("chat").context()
            assert [e.id for e in context.events] == [f"{r}{n}" for n in range(4) for r in "ua"]
            history = [r async for r in client.session("chat").compactions()]
            assert [r.strategy for r in history] == ["restore", "summarize"]
            assert history[1].restored_by == history[0].compaction_id
            assert (await client.get_session("chat")).auto_compaction_paused
        code, out = await run_cli("inspect", "chat", "--compactions", *addr)
        assert f"undid {landed.compaction_id}" in out
        assert f"restored by {history[0].compaction_id}" in out


async def test_inspect_shows_a_summarys_trail_and_what_each_pass_dropped(tmp_path: Path) -> None:
    async with running(tmp_path, summarizer=FakeSummarizer("they talked")) as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            strategy = Summarize(2, 1, max_summary_tokens=64, identifier_trail_tokens=32)
            await client.create_session("ids", CompactionPolicy(None, strategy))
            session = client.session("ids")
            for n in range(4):
                await session.append(
                    [
                        Event(id=f"u{n}", role=Role.USER, text=f"book ORD{n}00{n} " * 30),
                        Event(id=f"a{n}", role=Role.ASSISTANT, text=f"done {n}"),
                    ]
                )
            landed = await session.compact(force=True)
        addr = ("--addr", address(sidecar))
        code, out = await run_cli("inspect", "ids", *addr)
        assert code == 0, out
        assert "^ identifier trail (3): ORD2002, ORD1001, ORD0000" in out
        code, out = await run_cli("inspect", "ids", "--compactions", *addr)
        assert code == 0, out
        assert " dropped " in out.splitlines()[1]
        (row,) = [line for line in out.splitlines() if landed.compaction_id in line]
        assert row.split()[-2] == "0"  # the trail kept every identifier it archived


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_an_unreadable_token_file_and_a_refusal_are_one_line_on_stderr(tmp_path: Path) -> None:
    """The commands' errors go where a shell expects them, in one line, without a trace."""

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sidecar.cli", *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )

    for command in (["inspect", "s1"], ["restore", "s1"]):
        missing = cli(*command, "--token-file", "nope.tok")
        assert missing.returncode == 2
        assert missing.stdout == ""
        assert missing.stderr.splitlines() == [
            f"compaction-sidecar {command[0]}: token_file: cannot read 'nope.tok':"
            " No such file or directory"
        ]
        # The server's token file (TENANT TOKEN lines) given where the token alone goes.
        (tmp_path / "tokens").write_text("acme acme-token\nglobex globex-token\n")
        server_file = cli(*command, "--token-file", "tokens")
        assert server_file.returncode == 2
        assert server_file.stderr.splitlines() == [
            f"compaction-sidecar {command[0]}: token_file: 'tokens' must hold the bearer token"
            " alone (one line, no spaces; the server's token file has a TENANT TOKEN line each)"
        ]
        # Nothing listens there: the client's refusal, on stderr.
        unreachable = cli(*command, "--addr", f"127.0.0.1:{closed_port()}")
        assert unreachable.returncode == 1
        assert unreachable.stdout == ""
        (line,) = unreachable.stderr.splitlines()
        assert line.startswith(f"compaction-sidecar {command[0]}: ")


async def test_inspect_and_restore_reach_a_server_over_mutual_tls(tmp_path: Path) -> None:
    """They had no TLS options, so a server with TLS was out of their reach."""
    cert, key = self_signed(tmp_path)
    async with running(
        tmp_path, tls_cert=str(cert), tls_key=str(key), tls_client_ca=str(cert)
    ) as sidecar:
        tls = Tls(
            root_certificates=cert.read_bytes(),
            private_key=key.read_bytes(),
            certificate_chain=cert.read_bytes(),
        )
        async with AsyncClient(address(sidecar), tls=tls) as client:
            await client.session("s1").append(
                [Event(id="u1", role=Role.USER, text="hello")], create_if_missing=True
            )
        over_tls = ("--addr", address(sidecar), "--tls-ca", str(cert))
        client_cert = ("--tls-cert", str(cert), "--tls-key", str(key))
        code, out = await run_cli("inspect", "s1", *over_tls, *client_cert)
        assert code == 0, out
        assert "User: hello" in out
        code, out = await run_cli("restore", "s1", *over_tls, *client_cert)
        assert code == 1  # nothing to restore: the server answered
        assert out.startswith("compaction-sidecar restore: FAILED_PRECONDITION"), out
        # Without the client certificate, or without TLS, the server is not reached.
        for args in (over_tls, ("--addr", address(sidecar))):
            code, out = await run_cli("inspect", "s1", *args)
            assert code == 1
            assert len(out.splitlines()) == 1, out
        code, out = await run_cli("inspect", "s1", *over_tls, "--tls-cert", str(cert))
        assert (code, out) == (
            2,
            "compaction-sidecar inspect: tls_cert: --tls-cert and --tls-key go together\n",
        )
