"""The README's and the Python client's examples, run exactly as printed.

Each is read from its document (``tests/docs/markdown.py``), never copied, and
run against ``make serve`` on 127.0.0.1:50051 of a network namespace of its
own (``tests/docs/servers.py``), with what a user of this checkout has: the
``.venv`` that ``make serve`` sets up, grpcurl from ``make grpcurl``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from sidecar.compaction.policy import policy_from_dict
from sidecar.compaction.summarize import Summarize
from sidecar.server.auth import parse_tokens
from tests.docs.catalogue import (
    GRPCURL,
    LAYOUT,
    POLICY_YAML,
    PYTHON_TEN_LINES,
    TOKENS_MULTI_TENANT,
    TOKENS_SINGLE_TENANT,
)
from tests.docs.markdown import ROOT
from tests.docs.servers import make_serve

TOOLS = ROOT / ".tools" / "bin"


def test_the_python_clients_ten_lines_run_against_make_serve(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(PYTHON_TEN_LINES.text)
    with make_serve(tmp_path) as network:
        for _ in range(2):  # and again: the example can be re-run against the same server
            done = network.run([sys.executable, str(script)], cwd=tmp_path, timeout=60)
            assert done.returncode == 0, done.stderr
    assert "Where is my order?" in done.stdout
    assert "It ships today." in done.stdout


def test_the_readmes_grpcurl_and_inspect_lines_run_against_make_serve(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{TOOLS}{os.pathsep}{os.environ['PATH']}"}
    with make_serve(tmp_path) as network:
        done = network.run(["bash", "-euo", "pipefail", "-c", GRPCURL.text], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    assert "compaction.v1.CompactionService" in done.stdout  # list, through reflection
    assert '"version": "1"' in done.stdout  # the append's answer
    assert "session s1  version 1" in done.stdout  # inspect
    assert "User: hello" in done.stdout
    assert '"renderedJson": "{\\"messages\\":[{\\"role\\":\\"user\\"' in done.stdout  # GetContext


def test_the_readmes_policy_document_is_a_policy() -> None:
    policy = policy_from_dict(yaml.safe_load(POLICY_YAML.text))
    assert isinstance(policy.strategy, Summarize)
    assert (policy.strategy.max_events_to_keep, policy.strategy.overlap) == (10, 2)


def test_the_readmes_token_files_are_read_as_it_says() -> None:
    single = parse_tokens(TOKENS_SINGLE_TENANT.text.splitlines(), "single")
    assert not single.multi_tenant
    assert single.tenant_of(b"0f9c1e6b...") is None  # sees every session
    multi = parse_tokens(TOKENS_MULTI_TENANT.text.splitlines(), "multi")
    assert multi.multi_tenant
    assert multi.tenant_of(b"5be0c2d1...") == "acme"
    assert multi.tenant_of(b"0f9c1e6b...") == "default"


def test_the_readmes_layout_names_paths_that_exist() -> None:
    paths = [line.split()[0] for line in LAYOUT.text.splitlines() if not line.startswith(" ")]
    assert paths
    assert [p for p in paths if not (ROOT / p).exists()] == []
