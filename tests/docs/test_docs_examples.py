"""The examples of docs/ that are documents rather than commands, read as they are printed."""

from __future__ import annotations

import yaml

from sidecar.compaction.policy import policy_from_dict
from sidecar.compaction.summarize import Summarize
from sidecar.server.auth import parse_tokens
from tests.docs.catalogue import POLICY_YAML, TOKENS_MULTI_TENANT, TOKENS_SINGLE_TENANT


def test_the_semantics_pages_policy_document_is_a_policy() -> None:
    policy = policy_from_dict(yaml.safe_load(POLICY_YAML.text))
    assert isinstance(policy.strategy, Summarize)
    assert (policy.strategy.max_events_to_keep, policy.strategy.overlap) == (10, 2)


def test_the_security_pages_token_files_are_read_as_it_says() -> None:
    single = parse_tokens(TOKENS_SINGLE_TENANT.text.splitlines(), "single")
    assert not single.multi_tenant
    assert single.tenant_of(b"0f9c1e6b...") is None  # sees every session
    multi = parse_tokens(TOKENS_MULTI_TENANT.text.splitlines(), "multi")
    assert multi.multi_tenant
    assert multi.tenant_of(b"5be0c2d1...") == "acme"
    assert multi.tenant_of(b"0f9c1e6b...") == "default"
