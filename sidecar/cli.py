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
    if args.command == "demo":
        from sidecar import demo

        demo.main(args.strategy)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
