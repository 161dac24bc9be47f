"""A misconfigured ``serve`` exits within seconds, non-zero, with one line naming the setting.

Never a hang (a pod must crash-loop with a clear message, not sit there),
never a traceback. Each case runs the real command in a process of its own.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.errors import InvalidConfig
from sidecar.server import addresses
from tests.conftest import Postgres
from tests.server.harness import running
from tests.tls import self_signed

BINARY = str(Path(sys.executable).with_name("compaction-sidecar"))


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def serve(
    tmp_path: Path, *args: str, listen: str | None = "127.0.0.1:0"
) -> tuple[int, list[str], float]:
    """Run ``serve`` on a fresh SQLite file (and ``listen``, unless None: then left to ``args``)."""
    started = time.monotonic()
    done = subprocess.run(
        [
            BINARY,
            "serve",
            *(["--listen", listen] if listen is not None else []),
            "--store",
            f"sqlite:///{tmp_path}/s.db",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    # grpc's C core logs its own bind failure (lines starting E<date>); ours is the rest.
    ours = [line for line in done.stderr.splitlines() if line and line[:1] != "E"]
    return done.returncode, ours, time.monotonic() - started


def assert_refused(result: tuple[int, list[str], float], setting: str, *words: str) -> None:
    code, lines, elapsed = result
    assert code != 0
    assert elapsed < 10
    assert not any("Traceback" in line for line in lines), lines
    # Log records may come first (the store's resolved path); the error is one line, last.
    errors = [line for line in lines if line.startswith("compaction-sidecar:")]
    assert len(errors) == 1, lines
    assert lines[-1] == errors[0], lines
    assert errors[0].startswith(f"compaction-sidecar: {setting}: "), lines
    for word in words:
        assert word in errors[0], lines


def test_a_taken_port_fails_fast_naming_listen(tmp_path: Path, taken_port: int) -> None:
    assert_refused(
        serve(tmp_path, "--listen", f"127.0.0.1:{taken_port}"), "listen", str(taken_port), "taken"
    )


def test_a_taken_health_port_fails_fast_naming_health_listen(
    tmp_path: Path, taken_port: int
) -> None:
    result = serve(tmp_path, "--health-listen", f"127.0.0.1:{taken_port}")
    assert_refused(result, "health_listen", str(taken_port))


def test_a_taken_metrics_port_fails_fast_naming_metrics_listen(
    tmp_path: Path, taken_port: int
) -> None:
    result = serve(tmp_path, "--metrics-listen", f"127.0.0.1:{taken_port}")
    assert_refused(result, "metrics_listen", str(taken_port))


@pytest.mark.parametrize(
    ("args", "setting", "words"),
    [
        (["--listen", "nonsense"], "listen", ["nonsense", "host:port"]),
        (
            ["--tls-cert", "/nope/cert.pem", "--tls-key", "/nope/key.pem"],
            "tls_cert",
            ["/nope/cert.pem"],
        ),
        (["--log-level", "verbose"], "log_level", ["DEBUG", "INFO"]),
        (["--sqlite-synchronous", "FASTEST"], "sqlite_synchronous", ["NORMAL", "FULL"]),
        (["--default-policy", "./missing.yaml"], "default_policy", ["not found"]),
        (["--default-policy", "nonee"], "default_policy", ["did you mean none"]),
        (["--log-event-content", "maybe"], "log_event_content", ["boolean"]),
        (["--shutdown-grace-s", "-1"], "shutdown_grace_s", ["at least 0"]),
        (["--max-event-bytes", "lots"], "max_event_bytes", ["integer"]),
        (["--max-tool-calls-per-event", "0"], "max_tool_calls_per_event", ["at least 1"]),
        (["--max-tool-results-per-event", "-3"], "max_tool_results_per_event", ["at least 1"]),
        (["--max-parts-per-event", "0"], "max_parts_per_event", ["at least 1"]),
        (["--max-metadata-entries", "0"], "max_metadata_entries", ["at least 1"]),
        (["--max-items-per-append", "many"], "max_items_per_append", ["integer"]),
        (["--summarizer", "gpt"], "summarizer", ["extractive"]),
        (["--config", "/nope/settings.yaml"], "config", ["cannot read"]),
        # grpc takes message sizes as C ints: past that it raised OverflowError.
        (["--max-message-bytes", "2147483648"], "max_message_bytes", ["at most 2147483647"]),
        # NaN passed every "at least" check: a retry forever, a search timeout of nan s.
        (["--store-open-timeout-s", "nan"], "store_open_timeout_s", ["finite"]),
        (["--search-timeout-s", "inf"], "search_timeout_s", ["finite"]),
        (["--shutdown-grace-s", "NaN"], "shutdown_grace_s", ["finite"]),
        # Each connection would open a database of its own: writes acknowledged, then lost.
        (["--store", "sqlite:///:memory:"], "store", [":memory:"]),
        (["--store", "sqlite:///"], "store", ["file"]),
        # A number no policy message holds: every read of a session then failed INTERNAL.
        (
            [
                "--default-policy",
                '{"trigger": {"token_count": 99999999999999999999999999},'
                ' "strategy": {"token_budget": {"max_tokens": 4000}}}',
            ],
            "default_policy",
            ["out of range"],
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    tmp_path: Path, args: list[str], setting: str, words: list[str]
) -> None:
    assert_refused(serve(tmp_path, *args), setting, *words)


@pytest.mark.parametrize(
    ("value", "words"),
    [("{a: 1}", ["integer"]), ("[1, 2]", ["integer"]), ("true", ["integer"])],
)
def test_a_config_file_value_of_the_wrong_kind_names_the_setting(
    tmp_path: Path, value: str, words: list[str]
) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"max_event_bytes: {value}\n")
    assert_refused(serve(tmp_path, "--config", str(settings)), "max_event_bytes", *words)


def test_tls_material_that_is_not_what_it_should_be_names_its_setting(tmp_path: Path) -> None:
    """grpc took any bytes and failed the bind, blaming --listen; an empty client CA
    bundle refused every client at the handshake."""
    cert, key = self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    _, other_key = self_signed(tmp_path / "other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a PEM file\n")
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    for args, setting in (
        (["--tls-cert", str(garbage), "--tls-key", str(key)], "tls_cert"),
        (["--tls-cert", str(cert), "--tls-key", str(garbage)], "tls_key"),
        (["--tls-cert", str(cert), "--tls-key", str(other_key)], "tls_key"),
        (
            ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(empty)],
            "tls_client_ca",
        ),
        (
            ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(garbage)],
            "tls_client_ca",
        ),
    ):
        assert_refused(serve(tmp_path, *args), setting)


@pytest.mark.parametrize(
    ("setting", "address", "words"),
    [
        ("listen", "nonsense", ["'nonsense' is not host:port"]),
        ("listen", "127.0.0.1:99999", ["out of range"]),
        ("health_listen", "no-such-host.invalid:5000", ["is unknown"]),
        ("metrics_listen", "taken", ["is taken by another process"]),
        # gRPC's other forms were left to its bind, refused late and without the file's name
        ("listen", "ipv4:127.0.0.1:0", ["not the ipv4:/ipv6: forms of its clients"]),
        ("listen", "unix:", ["it names no socket file"]),
        ("health_listen", "vsock:x", ["is not vsock:CID:PORT"]),
        ("listen", "unix-abstract:" + "a" * 200, ["AF_UNIX path too long"]),
    ],
)
def test_a_bad_address_from_the_config_file_names_the_file(
    tmp_path: Path, taken_port: int, setting: str, address: str, words: list[str]
) -> None:
    """The addresses were checked only as serve started, where no one knew the file: the
    error named the setting alone, and said to set a flag or a variable instead."""
    settings = tmp_path / "settings.yaml"
    address = f"127.0.0.1:{taken_port}" if address == "taken" else address
    settings.write_text(f"{setting}: '{address}'\n")
    result = serve(tmp_path, "--config", str(settings), listen=None)
    assert_refused(result, setting, f"from {settings}: ", *words)
    assert "COMPACTION_" not in result[1][-1]
    assert not (tmp_path / "s.db").exists()


def test_a_config_file_with_a_yaml_error_names_the_config(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("listen: [unclosed\n")
    assert_refused(serve(tmp_path, "--config", str(settings)), "config", "settings.yaml")


def test_a_taken_port_is_one_line_naming_listen_and_the_cause(
    tmp_path: Path, taken_port: int
) -> None:
    """No gRPC C-core line before it, no "or" about what went wrong, no SQLite file left."""
    done = subprocess.run(
        [BINARY, "serve", "--listen", f"127.0.0.1:{taken_port}", "--store", "sqlite:///s.db"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"compaction-sidecar: listen: from --listen: cannot listen on '127.0.0.1:{taken_port}':"
        f" port {taken_port} is taken by another process"
    ]
    assert list(tmp_path.iterdir()) == []


def test_two_listeners_on_one_port_are_refused_before_start(tmp_path: Path) -> None:
    """Each address alone could be bound, so the probes passed both and the second bind
    failed once the store was open, after a gRPC C-core line."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    for health, words in (
        (f"127.0.0.1:{port}", "is where listen listens"),
        (f"0.0.0.0:{port}", "is where listen listens"),
    ):
        done = subprocess.run(
            [
                BINARY,
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--health-listen",
                health,
                "--store",
                f"sqlite:///{tmp_path}/s.db",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 2
        assert done.stderr.splitlines() == [
            f"compaction-sidecar: health_listen: from --health-listen: '{health}' {words}"
            f" ('127.0.0.1:{port}'); give each its own port"
        ]
        assert not (tmp_path / "s.db").exists()
    # port 0 (the kernel picks one each) never collides; another host on the port does not
    addresses.check_apart({"listen": "127.0.0.1:0", "health_listen": "127.0.0.1:0"})
    addresses.check_apart({"listen": "127.0.0.1:7000", "health_listen": "127.0.0.2:7000"})


async def test_a_bind_that_fails_late_leaves_no_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gRPC refuses an address only once the store is open (a port taken between the probe
    and the bind): the SQLite file this start made goes again."""
    monkeypatch.setattr(addresses, "check_apart", lambda *_: None)  # the race, made certain
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    with pytest.raises(InvalidConfig) as refused:
        async with running(tmp_path, listen=f"127.0.0.1:{port}", health_listen=f"127.0.0.1:{port}"):
            pass
    assert refused.value.field == "health_listen"
    assert not (tmp_path / "sidecar.db").exists()


def test_an_unreadable_file_setting_is_named_with_the_file_and_the_cause(tmp_path: Path) -> None:
    """The token file's error was Python's ("[Errno 2] No such file..."); with both TLS files
    bad, the key was named though the certificate comes first."""
    missing = str(tmp_path / "missing")
    assert_refused(
        serve(tmp_path, "--auth-token-file", missing),
        "auth_token_file",
        f"cannot read '{missing}': No such file or directory",
    )
    assert_refused(
        serve(tmp_path, "--tls-cert", str(tmp_path), "--tls-key", missing),
        "tls_cert",
        f"cannot read '{tmp_path}': Is a directory",
    )


def test_a_unix_socket_grpc_cannot_bind_is_one_line_naming_the_file_and_the_cause(
    tmp_path: Path,
) -> None:
    """gRPC refused these only once the store was open, with a C-core line and "not
    host:port, or the port is taken", and without saying where the address came from."""
    regular = tmp_path / "notes.txt"
    regular.write_text("not a socket")
    dangling = tmp_path / "gone.sock"
    dangling.symlink_to(tmp_path / "nothing")
    for path, cause in (
        (f"{tmp_path}/no/such/dir/s.sock", f"folder '{tmp_path}/no/such/dir' does not exist"),
        (str(regular), f"'{regular}' exists and is not a socket"),
        (f"{tmp_path}/{'s' * 120}.sock", "AF_UNIX path too long"),
        (str(dangling), f"'{dangling}' is a link to nothing"),
    ):
        settings = tmp_path / "settings.yaml"
        settings.write_text(f"health_listen: 'unix:{path}'\n")
        code, lines, elapsed = serve(tmp_path, "--config", str(settings))
        assert_refused((code, lines, elapsed), "health_listen", f"from {settings}: ", cause)
        assert not (tmp_path / "s.db").exists()


def test_a_unix_socket_another_server_listens_on_is_refused_a_stale_one_is_replaced(
    tmp_path: Path,
) -> None:
    """gRPC unlinks a socket file before binding: a live server's socket was taken from it."""
    (tmp_path / "my dir").mkdir()
    path = tmp_path / "my dir" / "api.sock"
    link = tmp_path / "link.sock"
    link.symlink_to(path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(path))
        other.listen()
        # gRPC percent-decodes the path and follows a link: each is that server's socket
        for address in (f"unix://{path}", f"unix:{tmp_path}/my%20dir/api.sock", f"unix:{link}"):
            assert_refused(
                serve(tmp_path, listen=address),
                "listen",
                "from --listen: ",
                "another process is listening on it",
            )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wedged:
        # a server that stopped accepting, its backlog full: a blocking probe waited for ever
        wedged.bind(str(tmp_path / "wedged.sock"))
        wedged.listen(0)
        filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(str(tmp_path / "wedged.sock"))
        try:
            assert_refused(
                serve(tmp_path, listen=f"unix:{tmp_path}/wedged.sock"),
                "listen",
                "another process is listening on it",
            )
        finally:
            filler.close()
    # Its server gone, the file is stale: the next serve binds it (and is told to stop).
    server = subprocess.Popen(
        [BINARY, "serve", "--listen", f"unix:{path}", "--store", f"sqlite:///{tmp_path}/s.db"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, "serve ended instead of replacing the stale socket"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                try:
                    client.connect(str(path))
                    break
                except OSError:
                    assert time.monotonic() < deadline, "serve never listened"
            time.sleep(0.1)
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_bad_value_from_the_environment_names_the_variable(tmp_path: Path) -> None:
    done = subprocess.run(
        [BINARY, "serve", "--store", f"sqlite:///{tmp_path}/s.db"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "COMPACTION_SHUTDOWN_GRACE_S": "-1"},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "compaction-sidecar: shutdown_grace_s: from COMPACTION_SHUTDOWN_GRACE_S:"
        " must be at least 0, got -1.0"
    ]


def test_sigterm_while_waiting_for_the_store_ends_serve_at_once_and_cleanly(
    tmp_path: Path,
) -> None:
    """A pod stopped while its database is still down stops then, not after its grace.

    As PID 1 in a container a signal with no handler is ignored, so a server that
    sets its handlers only once the store is open could not be stopped while it
    waits for one; here, outside a container, the same gap shows as the process
    killed by the signal rather than exiting by itself.
    """
    with socket.socket() as closed:  # a port nothing listens on: the store is unavailable
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    process = subprocess.Popen(
        [
            BINARY,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--health-listen",
            "127.0.0.1:0",
            "--store",
            f"postgresql://nobody@127.0.0.1:{dead}/none",
            "--store-open-timeout-s",
            "120",
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        for line in process.stderr:
            if "store unavailable at start, retrying" in line:
                break
            assert time.monotonic() < deadline, "never reported waiting for the store"
        process.send_signal(15)
        sent = time.monotonic()
        code = process.wait(timeout=20)
        took = time.monotonic() - sent
    finally:
        process.kill()
        process.wait()
    assert code == 0, f"ended by the signal ({code}), not by its own stop"
    assert took < 10


# -- the store ---------------------------------------------------------------------
# A store that cannot work as configured fails at once; only an unreachable database
# is waited for (--store-open-timeout-s), and these cases are not that.


def test_a_sqlite_store_on_a_directory_is_one_line_naming_store(tmp_path: Path) -> None:
    result = serve(tmp_path, "--store", f"sqlite:///{tmp_path}")
    assert_refused(result, "store", str(tmp_path), "directory")
    assert result[0] == 2


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/proc/x.db", "unable to open"),
        ("/proc/no/x.db", "cannot create the directory"),
        ("/dev/null/x.db", "cannot create the directory"),
    ],
)
def test_a_sqlite_store_where_no_file_can_be_made_is_one_line_naming_store(
    tmp_path: Path, path: str, reason: str
) -> None:
    result = serve(tmp_path, "--store", f"sqlite:///{path}")
    assert_refused(result, "store", path, reason)
    assert result[0] == 2


def test_a_sqlite_store_on_a_file_that_is_no_database_is_refused_at_once(
    tmp_path: Path,
) -> None:
    pem = tmp_path / "server.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n" + "A" * 4096 + "\n-----END CERTIFICATE-----\n")
    result = serve(tmp_path, "--store", f"sqlite:///{pem}", "--store-open-timeout-s", "20")
    assert_refused(result, "store", str(pem), "not a database")
    assert result[0] == 2
    assert not any("retrying" in line for line in result[1]), result[1]


@pytest.mark.parametrize(
    ("port", "words"),
    [("99999", ["99999", "port", "65535"]), ("0", ["port", "65535"]), ("abc", ["'abc'", "port"])],
)
def test_a_postgres_url_with_a_bad_port_is_one_line_naming_store(
    tmp_path: Path, port: str, words: list[str]
) -> None:
    result = serve(tmp_path, "--store", f"postgresql://u:p@127.0.0.1:{port}/db")
    assert_refused(result, "store", *words)
    assert result[0] == 2


def test_an_unknown_sslmode_is_refused_at_once(tmp_path: Path) -> None:
    """Not retried though nothing listens there: no wait makes the URL right."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    url = f"postgresql://u@127.0.0.1:{dead}/db?sslmode=bogus"
    result = serve(tmp_path, "--store", url, "--store-open-timeout-s", "20")
    assert_refused(result, "store", "sslmode", "verify-full")
    assert result[0] == 2
    assert not any("retrying" in line for line in result[1]), result[1]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        # asyncpg's refusal comes with a HINT on a line of its own; the error stays one line.
        ("?sslmode=verify-full", ["root.crt", "HINT"]),
        ("?sslmode=verify-full&sslrootcert={tmp}/none.crt", ["sslrootcert", "none.crt"]),
        # The tests' own server has no SSL (``tests/postgres_server.py``).
        ("?sslmode=require", ["SSL", "sslmode"]),
    ],
)
def test_ssl_settings_no_wait_would_mend_are_refused_at_once(
    tmp_path: Path,
    postgres: Postgres,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
    words: list[str],
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.postgresql/root.crt
    url = postgres.dsn("postgres") + query.format(tmp=tmp_path)
    result = serve(tmp_path, "--store", url, "--store-open-timeout-s", "20")
    assert_refused(result, "store", *words)
    assert result[0] == 2
    assert not any("retrying" in line for line in result[1]), result[1]


def test_a_search_path_schema_that_does_not_exist_is_refused_not_created(
    tmp_path: Path, postgres: Postgres
) -> None:
    """A typo must not start an empty store beside the real one (docs/deploying.md)."""
    url = postgres.dsn("postgres") + "?search_path=nosuch"
    result = serve(tmp_path, "--store", url, "--store-open-timeout-s", "20")
    assert_refused(result, "store", "nosuch", "CREATE SCHEMA")
    assert result[0] == 2


def test_a_password_in_the_query_never_reaches_stderr(tmp_path: Path) -> None:
    """Neither the warnings repeated while waiting for the store nor the final error."""
    with socket.socket() as closed:  # a port nothing listens on: the store is unavailable
        closed.bind(("127.0.0.1", 0))
        dead = closed.getsockname()[1]
    url = f"postgresql://pg@127.0.0.1:{dead}/db?password=hunter2&sslpassword=k3y"
    done = subprocess.run(
        [BINARY, "serve", "--listen", "127.0.0.1:0", "--store", url, "--store-open-timeout-s", "1"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert any("retrying" in line for line in lines), lines
    assert lines[-1].startswith("compaction-sidecar: cannot open the store: "), lines
    assert "password=***&sslpassword=***" in lines[-1], lines
    assert "hunter2" not in done.stderr
    assert "k3y" not in done.stderr


def test_a_role_that_may_not_create_the_tables_is_one_line_naming_store(
    tmp_path: Path, postgres: Postgres
) -> None:
    """Since PostgreSQL 15 only a database's owner may create in its public schema: a
    least-privilege role's first start failed the migration with a traceback."""
    import asyncio

    import asyncpg

    async def limited_role() -> str:
        admin = await asyncpg.connect(postgres.dsn("postgres"))
        try:
            await admin.execute("DROP DATABASE IF EXISTS limited_db")
            await admin.execute("DROP ROLE IF EXISTS limited")
            await admin.execute("CREATE ROLE limited LOGIN")
            await admin.execute("CREATE DATABASE limited_db")
        finally:
            await admin.close()
        head, _, tail = postgres.dsn("limited_db").partition("://")
        return f"{head}://limited@{tail.split('@', 1)[1]}"

    url = asyncio.run(limited_role())
    result = serve(tmp_path, "--store", url, "--store-open-timeout-s", "20")
    assert_refused(result, "store", "GRANT CREATE")
    assert result[0] == 2
