"""Print what the reliability suite did: the figures for the README's reliability section."""

from __future__ import annotations

from _pytest.terminal import TerminalReporter

from tests.reliability.budget import FIGURES, LABELS, LONG


def pytest_terminal_summary(terminalreporter: TerminalReporter) -> None:
    if not FIGURES:
        return
    mode = "long" if LONG else "quick"
    terminalreporter.section(f"reliability figures ({mode} mode)")
    for key, label in LABELS.items():
        if FIGURES.get(key):
            terminalreporter.write_line(f"{FIGURES[key]:>9,}  {label}")
