"""The ``compaction-sidecar`` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sidecar.client import Tls


def _connection_arguments(command: argparse.ArgumentParser) -> None:
    """How a client command reaches the server: its address, token and TLS."""
    command.add_argument(
        "--addr",
        default=os.environ.get("COMPACTION_ADDR", "127.0.0.1:50051"),
        help="the server (env COMPACTION_ADDR; default 127.0.0.1:50051)",
    )
    command.add_argument(
        "--token-file",
        default=os.environ.get("COMPACTION_TOKEN_FILE"),
        help="a file holding the bearer token alone (env COMPACTION_TOKEN_FILE)",
    )
    command.add_argument(
        "--tls", action="store_true", help="connect with TLS, trusting the system's roots"
    )
    command.add_argument(
        "--tls-ca", help="connect with TLS, trusting the CA certificates (PEM) in this file"
    )
    command.add_argument(
        "--tls-cert", help="with --tls-key: a client certificate (PEM), for mutual TLS"
    )
    command.add_argument("--tls-key", help="the client certificate's private key (PEM)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compaction-sidecar",
        description="Owns AI-agent conversation context: a versioned log, compacted turn-safely.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gRPC server")
    from sidecar.server.config import add_arguments

    add_arguments(serve)
    inspect = commands.add_parser(
        "inspect", help="render a session's log: kept, archived, summaries"
    )
    inspect.add_argument("session_id")
    _connection_arguments(inspect)
    inspect.add_argument(
        "--compactions",
        action="store_true",
        help="list the session's compaction history (newest first) instead of its log",
    )
    restore = commands.add_parser(
        "restore",
        help="undo a session's newest compaction (what it archived or cleared comes back)",
    )
    restore.add_argument("session_id")
    restore.add_argument(
        "compaction_id",
        nargs="?",
        default="",
        help="the compaction to undo; only the newest standing one can be (default: that one)",
    )
    restore.add_argument(
        "--pause",
        action="store_true",
        help="keep the trigger from compacting the restored window until the policy is next set",
    )
    _connection_arguments(restore)
    demo = commands.add_parser(
        "demo", help="replay a realistic agent transcript through each strategy"
    )
    demo.add_argument(
        "--strategy",
        choices=[
            "sliding_window",
            "turn_window",
            "token_budget",
            "summarize",
            "clear_tool_results",
            "pipeline",
        ],
        help="show one strategy only (pipeline also shows its restore)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command in ("inspect", "restore"):
        try:
            token, tls = _token(args.token_file), _tls(args)
        except _Unusable as exc:
            print(f"compaction-sidecar {args.command}: {exc}", file=sys.stderr)
            return 2
    if args.command == "inspect":
        from sidecar import inspect

        return inspect.main(
            args.addr, args.session_id, token, compactions=args.compactions, tls=tls
        )
    if args.command == "restore":
        from sidecar import inspect

        return inspect.restore_main(
            args.addr, args.session_id, args.compaction_id, token, pause=args.pause, tls=tls
        )
    if args.command == "demo":
        from sidecar import demo

        demo.main(args.strategy)
        return 0
    return 2


class _Unusable(Exception):
    """A client command's connection argument that cannot be used; the message names it."""


def _read(path: str, setting: str) -> bytes:
    from pathlib import Path

    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _Unusable(f"{setting}: cannot read {path!r}: {exc.strerror or exc}") from None


def _token(path: str | None) -> str | None:
    """The bearer token in the file at ``path`` (``--token-file``), or None without one."""
    if not path:
        return None
    token = _read(path, "token_file").decode(errors="replace").strip()
    if not token or any(c.isspace() or not c.isprintable() for c in token):
        # The server's --auth-token-file holds "TENANT TOKEN" lines; this one the token alone.
        raise _Unusable(
            f"token_file: {path!r} must hold the bearer token alone"
            " (one line, no spaces; the server's token file has a TENANT TOKEN line each)"
        )
    return token


def _tls(args: argparse.Namespace) -> Tls | None:
    """The client's TLS settings from ``--tls``, ``--tls-ca``, ``--tls-cert`` and ``--tls-key``."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise _Unusable("tls_cert: --tls-cert and --tls-key go together")
    if not (args.tls or args.tls_ca or args.tls_cert):
        return None
    from sidecar.client import Tls

    return Tls(
        root_certificates=_read(args.tls_ca, "tls_ca") if args.tls_ca else None,
        private_key=_read(args.tls_key, "tls_key") if args.tls_key else None,
        certificate_chain=_read(args.tls_cert, "tls_cert") if args.tls_cert else None,
    )


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    from sidecar.errors import InvalidConfig, SchemaTooNew, StoreUnavailable
    from sidecar.server import app, config, logs
    from sidecar.server.memory import limit_malloc_arenas

    limit_malloc_arenas()  # before any thread allocates

    try:
        settings = config.load(args)
        settings.policy()  # fail now, not at the first session
    except (InvalidConfig, OSError) as exc:
        print(f"compaction-sidecar: {exc}", file=sys.stderr)
        return 2
    try:
        logs.configure_logging(settings.log_level, settings.log_format)
    except ValueError as exc:
        print(f"compaction-sidecar: log_format: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(app.serve(settings))
    except (InvalidConfig, OSError) as exc:
        print(f"compaction-sidecar: {exc}", file=sys.stderr)
        return 2
    except (StoreUnavailable, SchemaTooNew) as exc:
        print(f"compaction-sidecar: cannot open the store: {exc}", file=sys.stderr)
        return 1
    _exit_now()
    return 0


def _exit_now() -> None:
    """End a drained server at once: the exit handlers run, the interpreter's teardown does not.

    Everything is closed by now (calls, summaries, the store). What is left,
    gRPC's core tearing itself down as the interpreter finalizes, took some
    3.5 s here on every exit, past any ``--shutdown-grace-s``; a pod's
    termination grace would pay it on every rollout. The exit handlers still
    run first (an OpenTelemetry SDK flushes its spans in one).
    """
    import atexit
    import logging
    import os

    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
