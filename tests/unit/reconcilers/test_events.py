"""Which changes of Ready get an Event: every change of a resource that was Ready or failed, none for a new resource
coming up (Ready for the first time, or waiting for its parent on the way), which a bulk apply makes by the
thousand."""

from __future__ import annotations

import pytest

from reconcilers.writer import worth_an_event


@pytest.mark.parametrize(
    ("before", "status", "reason", "event"),
    [
        (None, "True", "Synced", False),  # created: the status says so
        (None, "False", "ZoneNotReady", False),  # on its way: the Zone's own Event says what is wrong
        ("ZoneNotReady", "True", "Synced", False),
        ("ZoneNotReady", "False", "AccountNotReady", False),
        (None, "False", "InvalidToken", True),  # a failure on the way is news
        (None, "False", "AlreadyExists", True),
        ("ZoneNotReady", "False", "TerminalError", True),
        ("Synced", "False", "ZoneNotReady", True),  # it was Ready: any change is news
        ("Synced", "False", "APIError", True),
        ("APIError", "True", "Synced", True),  # it recovered
        ("Synced", "True", "Paused", True),
    ],
)
def test_an_event_for_each_change_a_user_wants_to_see(
    before: str | None, status: str, reason: str, event: bool
) -> None:
    assert worth_an_event(before, status, reason) is event
