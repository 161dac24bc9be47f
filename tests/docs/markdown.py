"""The fenced code blocks of the user-facing documents, read as printed.

Every block of ``DOCUMENTS`` is either run by a test in ``tests/docs`` (listed in
``tests/docs/catalogue.py``) or preceded by a ``<!-- not run: REASON -->`` line
that says why it cannot be; ``test_every_block_is_run_or_says_why`` holds both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DOCUMENTS = (
    "README.md",
    "docs/adapters.md",
    "clients/python/README.md",
    "clients/typescript/README.md",
    "clients/go/README.md",
    "clients/java/README.md",
)

NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")
FENCE = re.compile(r"^```(.*)$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it is, its info string and its text, verbatim."""

    document: str
    heading: str  # the nearest heading above it, e.g. "## Ten lines"
    info: str  # the fence's info string, e.g. "sh", "python", "" for a plain fence
    index: int  # its rank among the blocks of the same heading and info string
    line: int  # of the opening fence, 1-based
    text: str
    not_run: str | None  # the reason given in a <!-- not run: ... --> line right above


def blocks(document: str) -> list[Block]:
    """Every fenced block of ``document`` (a path relative to the repository), in order."""
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    heading = ""
    seen: dict[tuple[str, str], int] = {}
    number = 0
    while number < len(lines):
        line = lines[number]
        fence = FENCE.match(line)
        if line.startswith("#"):
            heading = line
        elif fence is not None:
            info = fence.group(1).strip()
            end = lines.index("```", number + 1)
            reason = NOT_RUN.match(lines[number - 1]) if number else None
            index = seen.get((heading, info), 0)
            seen[(heading, info)] = index + 1
            found.append(
                Block(
                    document=document,
                    heading=heading,
                    info=info,
                    index=index,
                    line=number + 1,
                    text="".join(f"{text}\n" for text in lines[number + 1 : end]),
                    not_run=reason.group(1) if reason else None,
                )
            )
            number = end
        number += 1
    return found


@dataclass(frozen=True, slots=True)
class Example:
    """A block a test runs, named by its document, heading, info string and rank."""

    document: str
    heading: str
    info: str
    index: int = 0

    @property
    def block(self) -> Block:
        for block in blocks(self.document):
            if (block.heading, block.info, block.index) == (self.heading, self.info, self.index):
                return block
        raise LookupError(f"{self}: no such block")

    @property
    def text(self) -> str:
        """The block's text exactly as printed."""
        return self.block.text
