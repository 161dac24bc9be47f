"""The domain's values: events, sessions, compaction plans and results.

Plain frozen dataclasses: no gRPC, no SQL. Every layer above speaks these.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from enum import Enum, StrEnum


class Role(Enum):
    """Who an event speaks for."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class Boundary(Enum):
    """Where a strategy may cut the log.

    TURN: the kept window starts at a USER event (a turn start).
    TOOL_PAIR: the kept window may start inside a turn, as long as no tool
    result is kept without the assistant event that requested it.
    """

    TURN = "turn"
    TOOL_PAIR = "tool_pair"


class Cause(StrEnum):
    """What set a compaction off (recorded in the compaction history)."""

    UNKNOWN = ""
    TRIGGER = "trigger"
    FORCE = "force"
    BACKGROUND = "background"
    RESTORE = "restore"


class SkipReason(StrEnum):
    """Why a compaction pass changed nothing."""

    TRIGGER_NOT_FIRED = "trigger_not_fired"
    WITHIN_LIMIT = "within_limit"
    NO_TURN_BOUNDARY = "no_turn_boundary"
    BLANK_SUMMARY = "blank_summary"
    NOT_WORTH_IT = "not_worth_it"
    SUPERSEDED = "superseded"
    NO_POLICY = "no_policy"
    IN_FLIGHT = "in_flight"
    FAILED = "failed"
    WOULD_DROP_IDENTIFIERS = "would_drop_identifiers"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation requested by the assistant; arguments are JSON text.

    ``signature`` is the provider's opaque token for the call (Gemini's
    ``thought_signature``), kept byte for byte and sent back unchanged.
    """

    id: str
    name: str
    arguments_json: str = "{}"
    signature: bytes = b""


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A block of the model's reasoning as its provider returned it.

    ``signature`` is the provider's opaque token (Gemini's thought signature,
    Anthropic's signature or redacted data, OpenAI's encrypted content),
    kept byte for byte: providers refuse a tool loop whose reasoning comes
    back altered. ``redacted`` marks a block returned encrypted only.
    """

    text: str = ""
    signature: bytes = b""
    redacted: bool = False
    id: str = ""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The answer to a ToolCall, matched by call_id."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Part:
    """Non-text content: inline bytes or a reference by URI.

    It is never rendered as its bytes: token accounting and summaries see
    a placeholder such as ``[image/png content]``.
    """

    mime_type: str
    data: bytes = b""
    uri: str = ""


# A random UUID's version (4) and variant (RFC 4122) bits, as ``uuid.uuid4`` sets them.
_UUID4_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)


def new_event_id() -> str:
    """A server-assigned event id: a random (version 4) UUID's 32 hex digits.

    What ``uuid.uuid4().hex`` gives, without building a UUID object on the
    way: once for every event appended without an id.
    """
    bits = int.from_bytes(os.urandom(16), "big")
    return f"{bits & _UUID4_KEEP | _UUID4_SET:032x}"


INT32_MAX = 2**31 - 1


def int32(value: int) -> int:
    """``value`` saturated to a 32-bit integer: a token total the API (int32 fields) and
    PostgreSQL's integer columns hold. A window of more tokens reads as ``INT32_MAX``, past
    every threshold a policy can set; decisions use the totals themselves."""
    return max(-INT32_MAX - 1, min(value, INT32_MAX))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a session's log.

    ``position`` is assigned by the store: a dense counter in write order.
    ``synthetic`` marks a summary turn the service wrote; ``archived`` marks an
    event that left the active window (it is never deleted). ``cleared`` marks
    an event whose tool results (or call arguments, or reasoning text) a
    clearing pass replaced: the active window carries the placeholder (and
    its token count), the log keeps the original. ``reasoning`` is the
    model's reasoning, before the text and tool calls.

    ``token_bounds`` is set while the event's exact count is pending (issue
    37: an append is estimated in O(bytes), counted exactly where a decision
    needs it): the least and the most tokens its exact count can be, with
    ``token_count`` an estimate between them. None once counted exactly.
    """

    id: str
    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    parts: tuple[Part, ...] = ()
    author: str = ""
    branch: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    create_time: datetime = field(default_factory=utcnow)
    position: int = 0
    synthetic: bool = False
    archived: bool = False
    token_count: int = 0
    cleared: bool = False
    reasoning: tuple[Reasoning, ...] = ()
    token_bounds: tuple[int, int] | None = None

    @property
    def token_count_estimated(self) -> bool:
        """Whether ``token_count`` is an estimate whose exact count is still pending."""
        return self.token_bounds is not None

    def content_bytes(self) -> int:
        """Approximate bytes of the event's content as stored and sent.

        Twice per appended event (its size checked, its write weighed): a list
        the event leaves empty costs no generator.
        """
        size = len(self.text.encode())
        if self.parts:
            size += sum(len(p.data) + len(p.uri) for p in self.parts)
        if self.tool_calls:
            size += sum(
                len(c.arguments_json) + len(c.name) + len(c.id) + len(c.signature)
                for c in self.tool_calls
            )
        if self.reasoning:
            size += sum(len(r.text.encode()) + len(r.signature) + len(r.id) for r in self.reasoning)
        if self.tool_results:
            size += sum(len(r.content.encode()) + len(r.name) for r in self.tool_results)
        if self.metadata:
            size += sum(len(k) + len(v) for k, v in self.metadata.items())
        return size

    @property
    def is_turn_start(self) -> bool:
        """A turn starts at each non-synthetic USER event."""
        return self.role is Role.USER and not self.synthetic

    @property
    def is_real(self) -> bool:
        """Conversation events: neither SYSTEM nor synthetic."""
        return self.role is not Role.SYSTEM and not self.synthetic

    def same_payload(self, other: Event) -> bool:
        """True when two events carry the same client-supplied content.

        Used to tell an idempotent retry (same id, same payload) from a
        conflicting write (same id, different payload).
        """
        return (
            self.role is other.role
            and self.text == other.text
            and self.tool_calls == other.tool_calls
            and self.tool_results == other.tool_results
            and self.parts == other.parts
            and self.reasoning == other.reasoning
            and self.author == other.author
            and self.branch == other.branch
            and dict(self.metadata) == dict(other.metadata)
        )

    def evolve(self, **changes: object) -> Event:
        """A copy with ``changes``; an unknown name raises TypeError, as ``replace`` does.

        Copies the fields one by one instead of calling ``dataclasses.replace``,
        which re-runs ``__init__``: every appended event is evolved twice
        (counted, then placed), and this costs a third less.
        """
        if not _EVENT_FIELD_SET.issuperset(changes):
            unknown = changes.keys() - _EVENT_FIELD_SET
            raise TypeError(f"Event has no field {min(unknown)!r}")
        copy = object.__new__(Event)
        for name in _EVENT_FIELDS:
            _set_field(copy, name, changes[name] if name in changes else getattr(self, name))
        return copy


_EVENT_FIELDS = tuple(f.name for f in fields(Event))
_EVENT_FIELD_SET = frozenset(_EVENT_FIELDS)
_set_field = object.__setattr__  # how a frozen dataclass sets its own fields


@dataclass(frozen=True, slots=True)
class SessionCounters:
    """Running totals the triggers read, kept exact by the store on each write.

    ``tokens`` counts what a token trigger sees: the latest stored system
    message, the summaries and the conversation. ``system_tokens`` is the
    latest system message's share of it, kept so a newer system message can
    replace it in O(1).

    Events whose exact count is pending (``Event.token_bounds``) are in
    ``tokens`` at their estimates; ``pending_below`` and ``pending_above`` say
    how far below and above those estimates their exact counts can lie, so
    the window's exact tokens are within ``tokens_low`` and ``tokens_high``
    (equal, and equal to ``tokens``, once nothing is pending). A system
    message is always counted when it is appended: it is never pending.
    """

    active_events: int = 0
    real_events: int = 0
    turns: int = 0
    tokens: int = 0
    system_tokens: int = 0
    turns_since_compaction: int = 0
    pending_below: int = 0
    pending_above: int = 0

    @property
    def tokens_exact(self) -> bool:
        """Whether ``tokens`` is the exact count: no event of the window is pending."""
        return self.pending_below == 0 and self.pending_above == 0

    @property
    def tokens_low(self) -> int:
        return self.tokens - self.pending_below

    @property
    def tokens_high(self) -> int:
        return self.tokens + self.pending_above

    def ends(self) -> tuple[SessionCounters, SessionCounters]:
        """These counters at the low and at the high end of the pending events' bounds.

        Every field but ``tokens`` is exact at both ends; the exact counters lie
        between them.
        """
        if self.tokens_exact:
            return self, self
        exact = replace(self, pending_below=0, pending_above=0)
        return replace(exact, tokens=self.tokens_low), replace(exact, tokens=self.tokens_high)

    def after_append(self, event: Event) -> SessionCounters:
        """The counters once ``event`` is appended to the active window."""
        tokens = self.tokens
        system_tokens = self.system_tokens
        below = self.pending_below
        above = self.pending_above
        if event.token_bounds is not None:
            low, high = event.token_bounds
            below += event.token_count - low
            above += high - event.token_count
        if event.role is Role.SYSTEM and not event.synthetic:
            if event.token_bounds is not None:
                raise ValueError("a system message is counted exactly when it is appended")
            tokens += event.token_count - system_tokens
            system_tokens = event.token_count
        else:
            tokens += event.token_count
        turn = 1 if event.is_turn_start else 0
        return SessionCounters(
            active_events=self.active_events + 1,
            real_events=self.real_events + (1 if event.is_real else 0),
            turns=self.turns + turn,
            tokens=tokens,
            system_tokens=system_tokens,
            turns_since_compaction=self.turns_since_compaction + turn,
            pending_below=below,
            pending_above=above,
        )

    def after_counting(self, pending: Event, exact: int) -> SessionCounters:
        """The counters once the exact count of ``pending``, an event of the window counted
        in them at its estimate, has landed."""
        if pending.token_bounds is None:
            return self
        low, high = pending.token_bounds
        return replace(
            self,
            tokens=self.tokens + exact - pending.token_count,
            pending_below=self.pending_below - (pending.token_count - low),
            pending_above=self.pending_above - (high - pending.token_count),
        )

    @staticmethod
    def of_window(
        events: Sequence[Event], turns_since_compaction: int | None = None
    ) -> SessionCounters:
        """Counters computed from an active window, in log order.

        With ``turns_since_compaction`` unset it counts every turn, as if the
        session had never been compacted.
        """
        counters = SessionCounters()
        for event in events:
            counters = counters.after_append(event)
        if turns_since_compaction is None:
            return counters
        return replace(counters, turns_since_compaction=turns_since_compaction)

    @staticmethod
    def after_compaction(active: Sequence[Event]) -> SessionCounters:
        """Counters for a freshly compacted window.

        The turn in progress belongs to the next interval, so
        ``turns_since_compaction`` restarts at 1 when a turn is kept.
        """
        counters = SessionCounters.of_window(active)
        return replace(counters, turns_since_compaction=1 if counters.turns else 0)

    def after_clearing(self, active: Sequence[Event]) -> SessionCounters:
        """Counters for a window whose tool results were cleared in place (nothing moved).

        ``turns_since_compaction`` keeps counting: every turn since the last
        compaction that archived or summarized is still in the window, so an
        interval trigger still fires and a pipeline still reaches its
        summarize step (ADK's interval mode with clearing first).
        """
        counters = SessionCounters.of_window(active)
        return replace(counters, turns_since_compaction=self.turns_since_compaction)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction pass wants written: flags to set and events to insert.

    ``inserts`` go right before the event ``insert_before`` in log order.
    ``clears`` are active events as they will read once cleared (placeholder
    content, its token count, ``cleared`` set); they stay active and in place,
    and the store keeps their original content beside the placeholder.
    ``base_compaction_id`` is the session's last compaction when the plan was
    made: the store rejects the plan if another compaction landed since.
    ``base_incarnation`` is the session's incarnation then (``Session.incarnation``):
    the store rejects the plan if the session was deleted and created again
    since, even with the same event ids (None: not checked).
    An empty plan (nothing archived, inserted or cleared) writes nothing.
    """

    strategy: str
    archive_ids: tuple[str, ...] = ()
    inserts: tuple[Event, ...] = ()
    clears: tuple[Event, ...] = ()
    insert_before: str | None = None
    tokens_estimated_saved: int = 0
    skipped_reason: SkipReason | None = None
    base_compaction_id: str = ""
    base_incarnation: int | None = None
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summarizer_latency_ms: float = 0.0
    cause: Cause = Cause.UNKNOWN
    identifiers_dropped: int = 0
    """The loss report (``sidecar.compaction.loss``): how many identifiers of what the
    plan archives or clears the window it leaves holds nowhere, and the best of them."""
    dropped_identifiers: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.archive_ids and not self.inserts and not self.clears


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """The outcome of a compaction pass, as the caller sees it.

    ``active_events`` is the new active window in log order; ``archived_events``
    what left it (still in the log). ``skipped_reason`` says why nothing
    happened when nothing did.
    """

    compacted: bool
    strategy: str
    active_events: tuple[Event, ...] = ()
    archived_events: tuple[Event, ...] = ()
    tokens_estimated_saved: int = 0
    skipped_reason: SkipReason | None = None
    version: int = 0
    compaction_id: str = ""
    error: str = ""
    content_omitted: bool = False
    """The events came without their content: the answer would have been too large."""
    cleared_ids: tuple[str, ...] = ()
    """The events this pass cleared: still active, in ``active_events`` with ``cleared`` set."""
    restored_ids: tuple[str, ...] = ()
    """For a restore: the events it made active again or uncleared, in log order."""
    identifiers_dropped: int = 0
    """The pass's loss report: identifiers of what it archived or cleared the window lost."""
    dropped_identifiers: tuple[str, ...] = ()

    archived_events_omitted: bool = False
    """``archived_events`` came empty: even their ids would have made the answer too large
    (the same for the three below); the full lists are in the compaction history."""
    active_events_omitted: bool = False
    cleared_ids_omitted: bool = False
    restored_ids_omitted: bool = False
    archived_count: int | None = None
    """How many events it archived, when ``archived_events`` does not list them."""

    @property
    def archived_event_count(self) -> int:
        if self.archived_count is not None:
            return self.archived_count
        return len(self.archived_events)


CALIBRATION_BOUNDS = (0.25, 4.0)
"""The calibration factor's range: a report outside it is taken as its bound."""
CALIBRATION_HORIZON = 8
"""Reports up to this many are averaged; later ones move the factor by 1/8 each."""


@dataclass(frozen=True, slots=True)
class TokenCalibration:
    """How the provider's reported prompt tokens compare with our estimates.

    ``factor`` is reported over estimated, an exponential moving average of
    the reports: the n-th report weighs 1/n up to the 8th, then 1/8, so the
    first reports set it quickly and a stray one later moves it little. Each
    report is bounded to ``CALIBRATION_BOUNDS`` first, so one absurd report
    (a prompt padded with tools the window does not hold) cannot make
    triggers fire on every append or never.
    """

    factor: float = 1.0
    samples: int = 0

    def after_report(self, ratio: float) -> TokenCalibration:
        """The calibration once a report of ``ratio`` (reported / estimated) is taken in."""
        low, high = CALIBRATION_BOUNDS
        bounded = min(high, max(low, ratio))
        samples = self.samples + 1
        weight = 1.0 / min(samples, CALIBRATION_HORIZON)
        return TokenCalibration(self.factor + weight * (bounded - self.factor), samples)

    def scaled(self, tokens: int) -> int:
        """``tokens`` as the provider is expected to count them."""
        return min(round(tokens * self.factor), INT32_MAX)


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """The prompt tokens a provider reported for the call made with one version's context."""

    context_version: int
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class UsageReport:
    """A usage report held against our estimate: what an append takes into the calibration.

    ``ratio`` is the reported prompt tokens over the estimate of the context
    of ``context_version`` in the session incarnation ``incarnation``
    (``Session.incarnation``). The store takes it in (``counts_for``) only in
    that incarnation, and only for a version the session has reached: a
    session deleted and created again under its id starts its calibration
    anew, and no report of the old one's contexts moves it.
    """

    ratio: float
    context_version: int
    incarnation: int

    def counts_for(self, session: Session) -> bool:
        """Whether this report calibrates ``session`` (its header before the append)."""
        return session.incarnation == self.incarnation and self.context_version <= session.version


NAMESPACE_SEPARATOR = "#"
"""Between a tenant's name and the client's id in a stored session id (``acme#s1``).

It never appears in an id a client sends, so a stored id without it is in no
tenant's namespace (single-tenant mode)."""


def namespace_of(session_id: str) -> str:
    """The tenant a stored session id belongs to; "" for one in no tenant's namespace."""
    namespace, separator, _ = session_id.partition(NAMESPACE_SEPARATOR)
    return namespace if separator else ""


@dataclass(frozen=True, slots=True)
class Session:
    """A session's header: identity, version, policy, model and running counters.

    ``model`` is the model the agent calls with this context ("" for none);
    ``calibration`` corrects token estimates by what its provider reported.
    """

    session_id: str
    version: int
    policy_json: str | None
    labels: Mapping[str, str]
    create_time: datetime
    update_time: datetime
    counters: SessionCounters
    total_events: int
    last_compaction_id: str = ""
    model: str = ""
    calibration: TokenCalibration = field(default_factory=TokenCalibration)
    auto_compaction_paused: bool = False
    stable_prefix_tokens: int = 0
    """Tokens of the window as the last compaction (clearing, restore) left it."""
    stable_prefix_events: int = 0
    """Events of the window as the last compaction (clearing, restore) left it: its stable
    prefix (``sidecar.providers.prefix``)."""

    @property
    def incarnation(self) -> int:
        """Which life of the session id this is: its create time, in microseconds.

        A session deleted and created again under its id is another incarnation.
        """
        moment = self.create_time
        if moment.tzinfo is None:  # a naive time is UTC, as the stores keep it
            moment = moment.replace(tzinfo=UTC)
        return (moment - _EPOCH) // _MICROSECOND


@dataclass(frozen=True, slots=True)
class LabelUpdate:
    """A change to one session's labels, stored in the same transaction as an append.

    ``session_id`` "" means the session appended to; another id names a
    session that is created (no policy, no events) when absent. With
    ``expected_version`` the whole append is refused unless that session is
    at that version (an absent one is at 0).
    """

    session_id: str = ""
    set: Mapping[str, str] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    expected_version: int | None = None

    def applied_to(self, labels: Mapping[str, str]) -> dict[str, str]:
        """``labels`` after this update: removals first, then the values set."""
        out = {k: v for k, v in labels.items() if k not in self.remove}
        out.update(self.set)
        return out
