"""Reading the server's answers back into the model: what the client knows, and no more."""

from __future__ import annotations

from sidecar.client import decode
from sidecar.gen.compaction.v1 import event_pb2


def test_an_estimated_count_is_flagged_with_no_bounds_made_from_content_not_sent() -> None:
    # A window too big for one answer comes without content: its counts are the server's.
    msg = event_pb2.Event(
        id="u1", role=event_pb2.ROLE_USER, token_count=400, token_count_estimated=True
    )
    event = decode.event(msg)
    assert event.token_count_estimated
    assert event.token_bounds is not None
    low, high = event.token_bounds
    assert low <= event.token_count <= high


def test_an_exact_count_is_not_flagged() -> None:
    msg = event_pb2.Event(id="u1", role=event_pb2.ROLE_USER, text="hi", token_count=6)
    assert not decode.event(msg).token_count_estimated
