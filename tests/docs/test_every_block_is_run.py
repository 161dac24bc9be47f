"""Every code block of the user-facing documents is run by a test, or says why not."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs import catalogue
from tests.docs.markdown import DOCUMENTS, blocks


def test_every_block_is_run_or_says_why() -> None:
    unmarked = {
        (b.document, b.heading, b.info, b.index): b.line
        for document in DOCUMENTS
        for b in blocks(document)
        if b.not_run is None
    }
    run = {(e.document, e.heading, e.info, e.index) for e in catalogue.ALL}
    missing = {key: line for key, line in unmarked.items() if key not in run}
    assert missing == {}, "blocks neither run (tests/docs/catalogue.py) nor marked not run"
    assert run - unmarked.keys() == set(), "catalogue entries with no such block, or marked"


def test_each_catalogued_block_is_used_by_a_test() -> None:
    names = [name for name, value in vars(catalogue).items() if value in catalogue.ALL]
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    unused = [n for n in names if not re.search(rf"\b{n}\.text\b", tests)]
    assert unused == []
