"""The estimates usage reports are held to: kept per incarnation and version, bounded."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.engine.estimates import ContextEstimates, KeptEstimate
from sidecar.model import Session, SessionCounters

LIFE = 1_000  # an incarnation (a create time in microseconds)


def read(
    session_id: str,
    life: int,
    version: int,
    tokens: int,
    *,
    below: int = 0,
    above: int = 0,
    through: int = 0,
) -> Session:
    """What a read of the session at ``version`` in its incarnation ``life`` finds."""
    created = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=life)
    return Session(
        session_id=session_id,
        version=version,
        policy_json=None,
        labels={},
        create_time=created,
        update_time=created,
        counters=SessionCounters(tokens=tokens, pending_below=below, pending_above=above),
        total_events=through,
    )


def test_the_last_versions_of_the_last_sessions_are_kept() -> None:
    estimates = ContextEstimates(max_sessions=2, per_session=3)
    for version in range(1, 6):
        estimates.note(read("a", LIFE, version, version * 100))
    kept = [estimates.estimate("a", v) for v in range(1, 6)]
    assert kept == [
        None,
        None,
        KeptEstimate(LIFE, 300, 0, 0, 0),
        KeptEstimate(LIFE, 400, 0, 0, 0),
        KeptEstimate(LIFE, 500, 0, 0, 0),
    ]
    estimates.note(read("b", LIFE, 1, 10))
    estimates.note(read("a", LIFE, 6, 600))  # a is the most recently used again
    estimates.note(read("c", LIFE, 1, 20))  # so b goes
    assert estimates.estimate("b", 1) is None
    assert (estimates.estimate("a", 6), estimates.estimate("c", 1)) == (
        KeptEstimate(LIFE, 600, 0, 0, 0),
        KeptEstimate(LIFE, 20, 0, 0, 0),
    )
    assert len(estimates) == 2


def test_a_version_noted_again_keeps_its_latest_estimate() -> None:
    estimates = ContextEstimates()
    estimates.note(read("a", LIFE, 3, 100))
    estimates.note(read("a", LIFE, 3, 120))
    assert estimates.estimate("a", 3) == KeptEstimate(LIFE, 120, 0, 0, 0)
    estimates.forget("a")
    assert estimates.estimate("a", 3) is None


def test_another_incarnation_drops_the_old_ones_estimates() -> None:
    estimates = ContextEstimates()
    for version in range(18, 22):
        estimates.note(read("a", LIFE, version, 400))
    estimates.note(read("a", LIFE + 1, 1, 10))  # deleted and created again, seen here first
    assert estimates.estimate("a", 21) is None
    assert estimates.estimate("a", 1) == KeptEstimate(LIFE + 1, 10, 0, 0, 0)


Move = tuple[int, int, int, int]  # (position, tokens, below, above), as ``counted`` takes it


@dataclass
class Log:
    """A session's events as a store keeps them: each (estimate, exact, low, high), and
    which have their exact count landed."""

    events: list[tuple[int, int, int, int]] = field(default_factory=list)
    landed: set[int] = field(default_factory=set)  # positions, from 1
    version: int = 0

    def read(self) -> Session:
        """What a read of the session finds."""
        tokens = below = above = 0
        for position, (estimate, exact, low, high) in enumerate(self.events, 1):
            if position in self.landed:
                tokens += exact
            else:
                tokens += estimate
                below += estimate - low
                above += high - estimate
        through = len(self.events)
        return read("s", LIFE, self.version, tokens, below=below, above=above, through=through)

    def pending(self) -> list[int]:
        return [p for p in range(1, len(self.events) + 1) if p not in self.landed]

    def land(self, positions: list[int]) -> list[Move]:
        """Land these pending events' counts: how each moved."""
        self.landed.update(positions)
        return [
            (p, exact - estimate, estimate - low, high - estimate)
            for p in positions
            for estimate, exact, low, high in [self.events[p - 1]]
        ]

    def exact(self, through: int) -> int:
        return sum(exact for _, exact, _, _ in self.events[:through])


STEPS = st.sampled_from(["append", "read", "keep", "write", "hear", "another replica lands"])


@settings(max_examples=300)  # with fewer, the races are missed now and then
@given(data=st.data())
def test_each_landing_moves_each_estimate_once_whatever_reads_it_runs_beside(
    data: st.DataObject,
) -> None:
    """Reads are kept in any order against this replica's landings (written, then heard of,
    one at a time) and other replicas' (never heard of): every estimate kept stays within its
    bounds, is the exact count when it says so, and is exact once every landing is heard of
    when no other replica landed."""
    estimates = ContextEstimates(per_session=1000)
    log = Log()
    reads: list[Session] = []
    unheard: tuple[Session, list[Move]] | None = None  # a landing written, not heard of yet
    others = False

    for step in data.draw(st.lists(STEPS, max_size=40)):
        if step == "append":
            low = data.draw(st.integers(0, 40))
            high = low + data.draw(st.integers(0, 40))
            exact, estimate = (data.draw(st.integers(low, high)) for _ in range(2))
            log.events.append((estimate, exact, low, high))
            log.version += 1
        elif step == "read":
            reads.append(log.read())
        elif step == "keep" and reads:
            estimates.note(reads.pop(data.draw(st.integers(0, len(reads) - 1))))
        elif step == "write" and log.pending() and unheard is None:
            moves = log.land(
                data.draw(st.lists(st.sampled_from(log.pending()), min_size=1, unique=True))
            )
            unheard = (log.read(), moves)
        elif step == "another replica lands" and log.pending():
            log.land(data.draw(st.lists(st.sampled_from(log.pending()), min_size=1, unique=True)))
            others = True
        elif step == "hear" and unheard is not None:
            estimates.counted(*unheard)
            unheard = None
    if unheard is not None:
        estimates.counted(*unheard)
    for seen in reads:
        estimates.note(seen)
    if log.pending():
        moves = log.land(log.pending())
        estimates.counted(log.read(), moves)

    for version in range(1, log.version + 1):
        kept = estimates.estimate("s", version)
        if kept is None:
            continue
        assert min(kept.below, kept.above) >= 0
        assert kept.tokens - kept.below <= log.exact(kept.through) <= kept.tokens + kept.above
        if kept.exact:
            assert kept.tokens == log.exact(kept.through)
        elif not others:
            raise AssertionError(f"version {version} is still estimated: {kept}")
