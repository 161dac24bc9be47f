"""The adapters' snippets in README.md and docs/adapters.md, run as printed.

Each is the line an existing agent changes; ``tests/docs/adapter_examples.py``
gives it that agent (a scripted model, a tool) and makes one turn through what
it built, against ``make serve`` on its defaults: the adapters' policies
summarize, as the documents say, and the default summarizer is the offline
extractive one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.docs.catalogue import (
    ADAPTERS_ADK_CACHE,
    ADAPTERS_ADK_CALLBACK,
    ADAPTERS_ADK_RECALL,
    ADAPTERS_ADK_SESSION_SERVICE,
    ADAPTERS_LANGCHAIN_CACHE,
    ADAPTERS_LANGCHAIN_MIDDLEWARE,
    ADAPTERS_LANGCHAIN_RECALL,
    ADK_SESSION_SERVICE,
    LANGCHAIN_MIDDLEWARE,
    TRY_ADK,
    TRY_ADK_OUTPUT,
    TRY_LANGCHAIN,
    TRY_LANGCHAIN_OUTPUT,
)
from tests.docs.markdown import ROOT
from tests.docs.servers import fresh_shell, make_serve


def test_the_adapter_snippets_run_in_the_agents_they_change(tmp_path: Path) -> None:
    snippets = [
        ("session-service", ADK_SESSION_SERVICE.text),
        ("middleware", LANGCHAIN_MIDDLEWARE.text),
        ("session-service", ADAPTERS_ADK_SESSION_SERVICE.text),
        ("callback", ADAPTERS_ADK_CALLBACK.text),
        ("middleware", ADAPTERS_LANGCHAIN_MIDDLEWARE.text),
        ("session-service", ADAPTERS_ADK_CACHE.text),
        ("middleware", ADAPTERS_LANGCHAIN_CACHE.text),
        ("recall-adk", ADAPTERS_ADK_RECALL.text),
        ("recall-middleware", ADAPTERS_LANGCHAIN_RECALL.text),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with make_serve(tmp_path) as network:
        done = network.run(
            [sys.executable, "-m", "tests.docs.adapter_examples"],
            input=json.dumps(snippets),
            cwd=ROOT,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(snippets), done.stdout
    assert lines[0].startswith("session-service -> ")
    assert not lines[0].startswith("session-service -> 0 ")
    assert all(" 0 model calls" not in line for line in lines), done.stdout
    assert lines[-2].endswith("tools get_weather,recall"), done.stdout
    assert lines[-1].endswith("tools recall"), done.stdout


def test_the_whole_adapter_scripts_run_with_the_venvs_python_and_print_what_is_shown(
    tmp_path: Path,
) -> None:
    # As a newcomer runs them: saved under their names, .venv/bin/python, a fresh shell;
    # twice, since a second run against the same server must work as the first.
    python = str(ROOT / ".venv" / "bin" / "python")
    scripts = [
        ("try_adk.py", TRY_ADK.text, TRY_ADK_OUTPUT.text),
        ("try_langchain.py", TRY_LANGCHAIN.text, TRY_LANGCHAIN_OUTPUT.text),
    ]
    with make_serve(tmp_path) as network:
        for name, text, shown in scripts:
            (tmp_path / name).write_text(text)
            for _ in range(2):
                done = network.run([python, name], cwd=tmp_path, env=fresh_shell(), timeout=120)
                assert done.returncode == 0, done.stderr
                assert done.stdout == shown, name
                assert done.stderr == "", name  # no framework warning either
