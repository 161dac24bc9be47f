"""The README's and the Python client's examples, run exactly as printed.

Each is read from its document (``tests/docs/markdown.py``), never copied, and
run against ``make serve`` on 127.0.0.1:50051 of a network namespace of its
own (``tests/docs/servers.py``), from a shell like a user's in a fresh clone:
what ``make serve`` and ``make grpcurl`` installed is there (``.venv``,
``.tools/bin/grpcurl``), but not on the PATH.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.docs.catalogue import (
    LAYOUT,
    PYTHON_TEN_LINES,
    README_PYTHON,
    TOUR_APPEND,
    TOUR_COMPACTION,
    TOUR_CONTEXT,
    TOUR_INSPECT,
    TOUR_RESTORE,
)
from tests.docs.markdown import ROOT
from tests.docs.servers import PrivateNetwork, fresh_shell, make_serve


def test_the_python_clients_ten_lines_run_against_make_serve(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(PYTHON_TEN_LINES.text)
    with make_serve(tmp_path) as network:
        for _ in range(2):  # and again: the example can be re-run against the same server
            done = network.run([sys.executable, str(script)], cwd=tmp_path, timeout=60)
            assert done.returncode == 0, done.stderr
    assert "Where is my order?" in done.stdout
    assert "It ships today." in done.stdout


def tour_step(network: PrivateNetwork, script: str) -> str:
    """One block of the tour, in bash from the checkout's root, failing on its first error."""
    done = network.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=fresh_shell())
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def grpcurl_answers(output: str) -> list[Any]:
    """grpcurl's answers, one JSON document after another, as objects."""
    decoder, answers, at = json.JSONDecoder(), [], 0
    while (at := output.find("{", at)) != -1:
        answer, at = decoder.raw_decode(output, at)
        answers.append(answer)
    return answers


def test_the_readmes_tour_runs_against_make_serve_from_a_fresh_shell(tmp_path: Path) -> None:
    # what the tour says to have done once, outside the server's network (it may download)
    subprocess.run(["make", "-s", "grpcurl"], cwd=ROOT, check=True, timeout=900)
    with make_serve(tmp_path) as network:
        appended = tour_step(network, TOUR_APPEND.text)
        context = tour_step(network, TOUR_CONTEXT.text)
        compacted = tour_step(network, TOUR_COMPACTION.text)
        inspected = tour_step(network, TOUR_INSPECT.text)
        restored = tour_step(network, TOUR_RESTORE.text)
    assert "compaction.v1.CompactionService" in appended.splitlines()  # list, by reflection
    created, first = grpcurl_answers(appended)
    assert created["policy"] == {
        "trigger": {"turnCount": 3},
        "strategy": {"turnWindow": {"maxTurns": 2}, "boundary": "BOUNDARY_TURN"},
    }
    assert [e["role"] for e in first["events"]] == ["ROLE_SYSTEM"] + [
        "ROLE_USER",
        "ROLE_ASSISTANT",
    ] * 2
    [window] = grpcurl_answers(context)
    assert len(window["events"]) == 5
    rendered = json.loads(window["renderedJson"])
    assert rendered["system"] == "You are a support agent."  # Anthropic Messages' fields
    assert [m["role"] for m in rendered["messages"]] == ["user", "assistant"] * 2
    [answer] = grpcurl_answers(compacted)
    compaction = answer["compaction"]
    assert compaction["strategy"] == "turn_window"
    assert compaction["archivedEventCount"] == 4
    # inspect: the system prompt kept, the first two turns archived, the newest two kept
    assert "      1 System: You are a support agent." in inspected
    assert "-     2 User: My order 4417-XK has not arrived." in inspected
    assert "      8 User: Thanks!" in inspected
    assert "turn_window" in inspected
    assert "dropped identifiers: 4417-XK" in inspected  # what the history says the pass dropped
    assert "4 events back in the window" in restored
    assert "(log: 8 events, 0 archived," in restored


def test_the_readmes_python_example_runs_with_the_venvs_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(README_PYTHON.text)
    python = str(ROOT / ".venv" / "bin" / "python")  # the README's .venv/bin/python example.py
    with make_serve(tmp_path) as network:
        done = network.run([python, str(script)], cwd=tmp_path, env=fresh_shell(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "['Where is my order?', 'It ships today.']\n"


def test_the_readmes_layout_names_paths_that_exist() -> None:
    paths = [line.split()[0] for line in LAYOUT.text.splitlines() if not line.startswith(" ")]
    assert paths
    assert [p for p in paths if not (ROOT / p).exists()] == []
