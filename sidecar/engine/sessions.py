"""Session headers: creating and updating sessions, and the policy a session runs under.

The checks that need the server's configuration live here: a summarizing
policy on a server without a summarizer, a model without a profile, a
``context_fraction`` trigger on a session without a model. Each is refused
up front, naming the field, rather than failing on every later append.
"""

from __future__ import annotations

from sidecar.compaction.calibration import resolved, uses_context_fraction
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.engine.host import EngineHost
from sidecar.engine.policy_cache import ParsedPolicies
from sidecar.engine.session_model import SessionModels
from sidecar.engine.validation import Limits, check_labels, check_stored_session_id
from sidecar.errors import NoSummarizer, VersionConflict
from sidecar.model import Session

_PARSED_POLICIES = ParsedPolicies()

UPDATE_ATTEMPTS = 5
"""How often an update checked against the session as read is retried when a write came
in between (an append, usually): each retry reads and checks again."""


def parse_policy(policy_json: str) -> CompactionPolicy:
    """A stored policy, parsed once per distinct document (within a memory bound)."""
    return _PARSED_POLICIES.get(policy_json)


def policy_json(policy: CompactionPolicy | None) -> str | None:
    return None if policy is None else policy.to_json()


class Sessions:
    """Creates and updates session headers over the engine's store, checking them first."""

    def __init__(
        self,
        host: EngineHost,
        models: SessionModels,
        limits: Limits,
        default_policy: CompactionPolicy | None,
    ) -> None:
        self._host = host
        self.models = models
        self.limits = limits
        self.default_policy = default_policy

    def check_policy(self, policy: CompactionPolicy | None, field: str = "policy") -> None:
        """Refuse a summarizing policy up front when there is nothing to summarize with.

        Otherwise every append past the trigger would start a pass doomed to fail.
        """
        if policy is None or self._host.summarizer:
            return
        if isinstance(policy.strategy, Summarize):
            raise NoSummarizer(f"{field}.strategy.summarize")
        if isinstance(policy.strategy, Pipeline):
            for index, step in enumerate(policy.strategy.steps):
                if isinstance(step, Summarize):
                    raise NoSummarizer(f"{field}.strategy.pipeline.steps[{index}].summarize")

    def policy_of(self, session: Session, *, raw: bool = False) -> CompactionPolicy | None:
        """The session's policy, resolved against its calibration and model (``raw``: as stored)."""
        if not session.policy_json:
            return None
        policy = parse_policy(session.policy_json)
        return policy if raw else resolved(policy, self.models.scale(session))

    async def create(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | None,
        use_default_policy: bool,
        labels: dict[str, str] | None,
        model: str,
    ) -> Session:
        """Create a session; without a policy it gets the server's default.

        ``model`` must have a profile; a ``context_fraction`` trigger needs one.
        """
        check_stored_session_id(session_id)
        check_labels(labels or {}, self.limits)
        self.check_policy(policy)
        self.models.check_model(model)
        self.models.check_policy(policy, model, "policy", "model")
        if policy is None and use_default_policy:
            policy = self.default_policy
        return await self._host.store.create_session(
            session_id, policy_json=policy_json(policy), labels=labels or {}, model=model
        )

    async def update(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | None,
        set_policy: bool,
        labels: dict[str, str] | None,
        model: str | None,
        expected_version: int | None,
    ) -> Session:
        """Replace the policy (when ``set_policy``), labels and/or model (when not None).

        A ``context_fraction`` trigger and a model must go together. When the
        update leaves one of them as the session has it (a fraction policy
        set on the stored model, or the model removed under the stored
        policy), the pair is checked against the session as read and written
        at that version, read and checked again if another write came in
        between, so no race leaves a fraction without a model.
        """
        check_stored_session_id(session_id)
        if set_policy:
            self.check_policy(policy, "session.policy")
        if labels is not None:
            check_labels(labels, self.limits, "session.labels")
        if model is not None:
            self.models.check_model(model, "session.model")
        if set_policy and model is not None:
            self.models.check_policy(policy, model, "session.policy", "session.model")
        depends = (set_policy and model is None and uses_context_fraction(policy)) or (
            model == "" and not set_policy
        )
        store = self._host.store
        for attempt in range(UPDATE_ATTEMPTS):
            guard = expected_version
            if depends:
                current = await store.get_session(session_id)
                after_policy = policy if set_policy else self.policy_of(current, raw=True)
                after_model = model if model is not None else current.model
                self.models.check_policy(
                    after_policy,
                    after_model,
                    "session.policy" if set_policy else "",
                    "session.model",
                )
                guard = current.version if expected_version is None else expected_version
            try:
                return await store.update_session(
                    session_id,
                    policy_json=policy_json(policy),
                    set_policy=set_policy,
                    labels=labels,
                    model=model,
                    expected_version=guard,
                )
            except VersionConflict:
                if expected_version is not None or not depends or attempt == UPDATE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")
