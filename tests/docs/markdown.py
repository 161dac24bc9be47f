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

# The README, every page of docs/ (a new page is held to the same rule the day it is
# added), and the clients' READMEs.
DOCUMENTS = (
    "README.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")),
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


def prose(document: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """``document``'s lines outside fenced blocks, numbered from 1, code spans blanked.

    What is left is where a link can be: ``[text](target)`` in a code span or a
    block is code, not a link. ``code_spans=True`` keeps the spans' text (a
    heading's anchor is made of it).
    """
    lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
    found: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(lines, start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            found.append((number, line if code_spans else re.sub(r"`[^`]*`", "``", line)))
    return found


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(document: str) -> set[str]:
    """The anchors of ``document``'s headings; a repeat gets ``-1``, ``-2``... as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose(document, code_spans=True):
        if re.match(r"#{1,6} ", line):
            base = anchor(line)
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found
