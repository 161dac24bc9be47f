"""The engine as its parts see it: the attributes they read from it.

The step and pipeline runners, the single-flight registry, the replica relay
and the append path are handed the engine itself rather than copies of its
store, hub and observer, and read them on each use, so an attribute the
engine's owner swaps (a test replaces the watcher hub) takes effect
everywhere at once. The protocols keep them from importing the engine they
serve.
"""

from __future__ import annotations

from typing import Protocol

from sidecar.compaction.policy import CompactionPolicy
from sidecar.engine.exact_counts import ExactCounts
from sidecar.engine.locks import LockRegistry
from sidecar.engine.observer import EngineObserver
from sidecar.engine.session_model import SessionModels
from sidecar.engine.validation import Limits
from sidecar.engine.watchers import WatcherHub
from sidecar.engine.window_work import WindowWork
from sidecar.model import Session
from sidecar.store.protocol import Store
from sidecar.summarizer.protocol import Summarizer
from sidecar.tokenizer import TokenEstimator


class EngineHost(Protocol):
    """What the engine's parts read from it; ``SessionEngine`` is the one implementation."""

    @property
    def store(self) -> Store: ...

    @property
    def locks(self) -> LockRegistry: ...

    @property
    def estimator(self) -> TokenEstimator: ...

    @property
    def summarizer(self) -> Summarizer | None: ...

    @property
    def observer(self) -> EngineObserver: ...

    @property
    def watchers(self) -> WatcherHub: ...

    @property
    def summary_timeout_s(self) -> float: ...

    @property
    def window_work(self) -> WindowWork: ...

    @property
    def counts(self) -> ExactCounts: ...


class AppendHost(EngineHost, Protocol):
    """What the append path reads from the engine besides what every part reads."""

    @property
    def limits(self) -> Limits: ...

    @property
    def models(self) -> SessionModels: ...

    @property
    def log_event_content(self) -> bool: ...

    def policy_of(self, session: Session, *, raw: bool = False) -> CompactionPolicy | None: ...
