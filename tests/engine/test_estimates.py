"""The estimates usage reports are held to: kept per version, bounded in sessions and versions."""

from __future__ import annotations

from sidecar.engine.estimates import ContextEstimates


def test_the_last_versions_of_the_last_sessions_are_kept() -> None:
    estimates = ContextEstimates(max_sessions=2, per_session=3)
    for version in range(1, 6):
        estimates.note("a", version, version * 100)
    assert [estimates.estimate("a", v) for v in range(1, 6)] == [None, None, 300, 400, 500]
    estimates.note("b", 1, 10)
    estimates.note("a", 6, 600)  # a is the most recently used again
    estimates.note("c", 1, 20)  # so b goes
    assert estimates.estimate("b", 1) is None
    assert (estimates.estimate("a", 6), estimates.estimate("c", 1)) == (600, 20)
    assert len(estimates) == 2


def test_a_version_noted_again_keeps_its_latest_estimate() -> None:
    estimates = ContextEstimates()
    estimates.note("a", 3, 100)
    estimates.note("a", 3, 120)
    assert estimates.estimate("a", 3) == 120
    estimates.forget("a")
    assert estimates.estimate("a", 3) is None
