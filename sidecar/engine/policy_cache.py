"""Stored policies, parsed once per distinct document and kept within a memory bound.

Every append reads its session's policy, so parsing it each time would cost
more than the trigger check it serves. Kept by document, bounded by an
estimate of the memory held (see ``BYTES_PER_CHAR``), not by a count: a few
large policies must not hold as much as thousands of small ones. When full it
starts over, which costs one parse per policy in use, never a wrong answer.
"""

from __future__ import annotations

import json

from sidecar.compaction.policy import CompactionPolicy, policy_from_dict

DEFAULT_MAX_BYTES = 8 << 20

BYTES_PER_CHAR = 5
ENTRY_OVERHEAD = 512
"""What an entry holds, measured with tracemalloc: the document itself, and
the parsed policy at up to four bytes per character of it (a prompt is held
once more; each trigger is an object of ~50 bytes for ~17 characters), plus
the policy's and its strategy's objects. An entry is charged
``BYTES_PER_CHAR * len(document) + ENTRY_OVERHEAD``."""


class ParsedPolicies:
    """Parsed policies by their stored document (see the module docstring)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._by_document: dict[str, CompactionPolicy] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._by_document)

    @property
    def bytes_held(self) -> int:
        """The estimate of what the policies held take (what the bound counts)."""
        return self._bytes

    def get(self, document: str) -> CompactionPolicy:
        """The policy ``document`` holds, parsed at most once while it stays."""
        known = self._by_document.get(document)
        if known is not None:
            return known
        # Unbounded: a stored policy was accepted when it was written (policy_from_dict).
        policy = policy_from_dict(json.loads(document), bounded=False)
        size = BYTES_PER_CHAR * len(document) + ENTRY_OVERHEAD
        if size > self.max_bytes:  # never kept (and a bound of 0 keeps nothing)
            return policy
        if self._bytes + size > self.max_bytes:
            self._by_document = {}
            self._bytes = 0
        self._by_document[document] = policy
        self._bytes += size
        return policy

    def clear(self) -> None:
        self._by_document = {}
        self._bytes = 0
