"""One table of settings: ``ServerConfig``, ``serve --help`` and the README say the same."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

from sidecar.cli import build_parser
from sidecar.server.config import ServerConfig
from sidecar.server.settings import SETTINGS, help_text, markdown_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_documented_once() -> None:
    assert [s.name for s in SETTINGS] == [f.name for f in fields(ServerConfig)]


def test_the_readme_shows_the_table_serve_help_is_made_from() -> None:
    text = README.read_text()
    start = text.index("<!-- settings:")
    start = text.index("\n", start) + 1
    end = text.index("<!-- /settings -->")
    assert text[start:end] == markdown_table(), "paste markdown_table() into the README"


def test_serve_help_gives_each_settings_meaning_default_and_variable() -> None:
    commands: Any = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    actions = {a.dest: a for a in commands["serve"]._actions}
    for setting in SETTINGS:
        shown = actions[setting.name].help or ""
        assert shown == help_text(setting)
        assert setting.env in shown
        assert "default:" in shown


def test_every_section_a_setting_points_to_exists() -> None:
    """``see Observability``, ``see The session's model``: a heading or a paragraph's bold lead."""
    text = README.read_text()
    for setting in SETTINGS:
        for name in re.findall(r"\bsee ([A-Z][^,;)]*)", setting.meaning):
            assert f"## {name}\n" in text or f"**{name}**" in text or f"**{name}.**" in text, (
                f"{setting.name}: no section {name!r} in the README"
            )
