"""The estimates usage reports are held to: kept per incarnation and version, bounded."""

from __future__ import annotations

from sidecar.engine.estimates import ContextEstimates

LIFE = 1_000  # an incarnation (a create time in microseconds)


def test_the_last_versions_of_the_last_sessions_are_kept() -> None:
    estimates = ContextEstimates(max_sessions=2, per_session=3)
    for version in range(1, 6):
        estimates.note("a", LIFE, version, version * 100)
    kept = [estimates.estimate("a", v) for v in range(1, 6)]
    assert kept == [None, None, (LIFE, 300, True), (LIFE, 400, True), (LIFE, 500, True)]
    estimates.note("b", LIFE, 1, 10)
    estimates.note("a", LIFE, 6, 600)  # a is the most recently used again
    estimates.note("c", LIFE, 1, 20)  # so b goes
    assert estimates.estimate("b", 1) is None
    assert (estimates.estimate("a", 6), estimates.estimate("c", 1)) == (
        (LIFE, 600, True),
        (LIFE, 20, True),
    )
    assert len(estimates) == 2


def test_a_version_noted_again_keeps_its_latest_estimate() -> None:
    estimates = ContextEstimates()
    estimates.note("a", LIFE, 3, 100)
    estimates.note("a", LIFE, 3, 120)
    assert estimates.estimate("a", 3) == (LIFE, 120, True)
    estimates.forget("a")
    assert estimates.estimate("a", 3) is None


def test_another_incarnation_drops_the_old_ones_estimates() -> None:
    estimates = ContextEstimates()
    for version in range(18, 22):
        estimates.note("a", LIFE, version, 400)
    estimates.note("a", LIFE + 1, 1, 10)  # deleted and created again, seen here first
    assert estimates.estimate("a", 21) is None
    assert estimates.estimate("a", 1) == (LIFE + 1, 10, True)
