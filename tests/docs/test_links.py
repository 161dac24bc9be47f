"""Every relative link of the documents leads somewhere: a file that exists, a heading it has.

A page moved or a heading renamed breaks the links to it; this finds them, in
the README, every page of docs/ and the clients' READMEs.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from tests.docs.markdown import DOCUMENTS, ROOT, anchors, prose

LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # https:, mailto:


def broken_links(document: str) -> list[str]:
    """``document``'s relative links whose file or heading does not exist, with their line."""
    broken = []
    for number, line in prose(document):
        for target in LINK.findall(line):
            if SCHEME.match(target):
                continue
            path, _, fragment = target.partition("#")
            resolved = PurePosixPath(document).parent / path if path else PurePosixPath(document)
            file = ROOT / resolved
            if not file.exists():
                broken.append(f"{document}:{number}: {target} (no file {resolved})")
            elif fragment and (file.suffix != ".md" or fragment not in anchors(str(resolved))):
                broken.append(f"{document}:{number}: {target} (no heading #{fragment})")
    return broken


def test_every_relative_link_points_to_a_file_and_heading_that_exist() -> None:
    assert [broken for document in DOCUMENTS for broken in broken_links(document)] == []


def test_a_missing_file_or_heading_is_found_and_code_is_not_a_link(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## Recall: `what` moved out\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/page.md#recall-what-moved-out) [top](#top) [page](docs/page.md)\n"
        "[gone](docs/gone.md) [wrong](docs/page.md#recall)\n"
        "`[code](docs/gone.md)`\n"
        "```\n[block](docs/gone.md)\n```\n"
        "# Top\n[web](https://example.com/x.md)\n"
    )
    assert broken_links(str(readme)) == [
        f"{readme}:2: docs/gone.md (no file {tmp_path}/docs/gone.md)",
        f"{readme}:2: docs/page.md#recall (no heading #recall)",
    ]
