"""The ``compaction-sidecar`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="compaction-sidecar",
        description="Owns AI-agent conversation context: a versioned log, compacted turn-safely.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gRPC server")
    from sidecar.server.config import add_arguments

    add_arguments(serve)
    demo = commands.add_parser(
        "demo", help="replay a realistic agent transcript through each strategy"
    )
    demo.add_argument(
        "--strategy",
        choices=["sliding_window", "turn_window", "token_budget", "summarize"],
        help="show one strategy only",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "demo":
        from sidecar import demo

        demo.main(args.strategy)
        return 0
    return 2


def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from sidecar.errors import InvalidConfig
    from sidecar.server import app, config

    try:
        settings = config.load(args)
        settings.policy()  # fail now, not at the first session
    except (InvalidConfig, OSError) as exc:
        print(f"compaction-sidecar: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        asyncio.run(app.serve(settings))
    except (InvalidConfig, OSError) as exc:
        print(f"compaction-sidecar: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
