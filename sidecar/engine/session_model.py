"""The session's model: its profile, the policies it allows, and its token calibration.

A session may name the model its agent calls (``Session.model``). The name
must have a profile (``sidecar.providers.profiles``): the profile's window is
what a ``context_fraction`` trigger is a fraction of, so a policy with one is
refused up front on a session without a model, rather than never firing (or
failing at run time, as LangChain's middleware does).

Usage reports calibrate the session's estimates: the provider's prompt
tokens for the call made with the context of version v, over what we
counted that context at (``ContextEstimates``), exactly: a version handed out
with estimates is held to its exact count once it lands. The ratio goes to the
store with the append that carries the report and lands in its transaction.
"""

from __future__ import annotations

from sidecar.compaction.calibration import TokenScale, uses_context_fraction
from sidecar.compaction.policy import CompactionPolicy
from sidecar.engine.estimates import ContextEstimates, KeptEstimate
from sidecar.errors import InvalidArgument, InvalidConfig
from sidecar.model import ModelUsage, Session, UsageReport
from sidecar.providers.profiles import MAX_NAME_CHARS, ModelProfile, ModelProfiles

MAX_PROMPT_TOKENS = 1 << 40


class SessionModels:
    """Checks model names and policies against profiles; turns usage reports into ratios."""

    def __init__(self, profiles: ModelProfiles | None = None) -> None:
        self.profiles = profiles or ModelProfiles()
        self.estimates = ContextEstimates()

    def profile(self, session: Session) -> ModelProfile | None:
        return self.profiles.find(session.model) if session.model else None

    def check_model(self, model: str, field: str = "model") -> None:
        """An empty name (no model) or one with a profile; InvalidConfig(field) otherwise."""
        if len(model) > MAX_NAME_CHARS:
            raise InvalidConfig(field, f"must be at most {MAX_NAME_CHARS} characters")
        if not model.isprintable():
            # A dated snapshot matches its family by prefix, so "gpt-4o-\x00" would find a
            # profile; PostgreSQL text cannot hold a NUL. One rule keeps both stores alike.
            raise InvalidConfig(field, "must hold no NUL or other control characters")
        if model:
            self.profiles.require(model, field)

    def check_policy(
        self, policy: CompactionPolicy | None, model: str, field: str, model_field: str
    ) -> None:
        """Refuse a ``context_fraction`` trigger for a session without a model.

        ``field`` names the policy when it is the policy that is new, and
        ``model_field`` the model when it is the model that is being removed.
        """
        if model or not uses_context_fraction(policy):
            return
        if field:
            raise InvalidConfig(
                f"{field}.trigger.context_fraction",
                "needs the session's model (set model): a fraction of whose window?",
            )
        raise InvalidConfig(
            model_field,
            "the session's policy has a context_fraction trigger, which needs a model",
        )

    def scale(self, session: Session) -> TokenScale:
        """What the session's policy is resolved against (``calibration.resolved``)."""
        profile = self.profile(session)
        return TokenScale(
            factor=session.calibration.factor,
            usable_tokens=profile.usable_tokens if profile is not None else 0,
        )

    def note(self, session: Session) -> None:
        """Keep the estimate of the context this session's version holds."""
        self.estimates.note(session)

    def forget(self, session_id: str) -> None:
        """Drop the session's estimates: it was deleted."""
        self.estimates.forget(session_id)

    def check_usage(self, usage: ModelUsage) -> None:
        """A usage report's own fields, checked before anything is counted for it."""
        if usage.context_version < 1:
            raise InvalidArgument("usage.context_version", "must be a version, 1 or more")
        if not 1 <= usage.prompt_tokens <= MAX_PROMPT_TOKENS:
            raise InvalidArgument("usage.prompt_tokens", f"must be from 1 to {MAX_PROMPT_TOKENS}")

    def usage_report(
        self, usage: ModelUsage, kept: KeptEstimate | None
    ) -> tuple[UsageReport | None, str]:
        """The report (checked: ``check_usage``) held against ``kept``, the estimate kept of
        its version, or None and why it is not taken in.

        The store takes it in only for the incarnation the estimate was made
        in and a version the session has reached (``UsageReport.counts_for``).
        """
        if kept is None:
            return None, (
                f"no estimate kept for version {usage.context_version} (not reached yet, too"
                " old, from another replica, or before a restart): the report was not counted"
            )
        if not kept.exact:
            return None, ESTIMATED.format(version=usage.context_version)
        if kept.tokens == 0:
            return None, f"version {usage.context_version} was estimated at 0 tokens"
        ratio = usage.prompt_tokens / kept.tokens
        return UsageReport(ratio, usage.context_version, kept.incarnation), ""


ESTIMATED = (
    "version {version}'s context was estimated, and the exact counts of its events were not"
    " landed here (another replica counted them): the report was not counted"
)
"""Why a report is not held against an estimate: it calibrates against exact counts only. The
engine lands the version's counts first (``ExactCounts.usage_report``); this is what is left."""

NOT_THIS_SESSION = (
    "version {version} is not one this session has reached (it was deleted and created"
    " again since that context was read, or the version is newer): the report was not counted"
)
"""Why a report the store declined (``UsageReport.counts_for``) was not counted."""
