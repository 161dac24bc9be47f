"""One table of settings: ``ServerConfig``, ``serve --help`` and docs/configuration.md agree."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from sidecar.cli import build_parser
from sidecar.server.config import ServerConfig
from sidecar.server.settings import SETTINGS, help_text, markdown_table

ROOT = Path(__file__).resolve().parents[2]
CONFIGURATION = ROOT / "docs" / "configuration.md"


def test_every_setting_is_documented_once() -> None:
    assert [s.name for s in SETTINGS] == [f.name for f in fields(ServerConfig)]


def test_the_configuration_page_shows_the_table_serve_help_is_made_from() -> None:
    text = CONFIGURATION.read_text()
    start = text.index("<!-- settings:")
    start = text.index("\n", start) + 1
    end = text.index("<!-- /settings -->")
    assert text[start:end] == markdown_table(), "paste markdown_table() into docs/configuration.md"


def test_serve_help_gives_each_settings_meaning_default_and_variable() -> None:
    commands: Any = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    actions = {a.dest: a for a in commands["serve"]._actions}
    for setting in SETTINGS:
        shown = actions[setting.name].help or ""
        assert shown == help_text(setting)
        assert setting.env in shown
        assert "default:" in shown


def sections(text: str) -> set[str]:
    """What ``see NAME`` may name in a page: its headings, and its paragraphs' bold leads."""
    headings = set(re.findall(r"^#+ (.+)$", text, re.MULTILINE))
    return headings | set(re.findall(r"\*\*([^*]+?)\.?\*\*", text))


def pointers(meaning: str) -> list[tuple[str, str]]:
    """Each ``see docs/PAGE.md`` or ``see docs/PAGE.md, Section`` of a setting's meaning."""
    return re.findall(r"\bsee (docs/[\w-]+\.md)(?:, ([A-Z][^,;)]*))?", meaning)


def test_every_page_and_section_a_setting_points_to_exists() -> None:
    """``see docs/observability.md``, ``see docs/semantics.md, The session's model``."""
    for setting in SETTINGS:
        assert not re.search(r"\bsee (?!docs/)[A-Z]", setting.meaning), (
            f"{setting.name}: name the page (see docs/PAGE.md, Section)"
        )
        for page, section in pointers(setting.meaning):
            assert (ROOT / page).is_file(), f"{setting.name}: no page {page}"
            assert not section or section in sections((ROOT / page).read_text()), (
                f"{setting.name}: no section {section!r} in {page}"
            )


def test_a_pointer_names_its_page_and_section() -> None:
    assert pointers("fsync (see docs/reliability.md, Durability) or `EXTRA`") == [
        ("docs/reliability.md", "Durability")
    ]
    assert pointers("an endpoint, see docs/observability.md") == [("docs/observability.md", "")]
    assert "What makes reads fast" in sections("# P\n\n## What makes reads fast\n")
    assert "Calibration" in sections("**Calibration.** cl100k is not")


def test_a_numeric_default_shown_is_the_configs_own() -> None:
    """A bare number in the table is ``ServerConfig``'s default, so the two cannot drift
    (``read_cache_mib`` once showed 64 after the config's default became 16)."""
    defaults = {f.name: f.default for f in fields(ServerConfig)}
    checked = 0
    for setting in SETTINGS:
        if re.fullmatch(r"-?\d+(\.\d+)?", setting.default):
            assert float(setting.default) == defaults[setting.name], setting.name
            checked += 1
    assert checked >= 5  # the table keeps showing plain numbers for most limits
