"""What a new resource coming up costs the API server: which changes of Ready get an Event (failures, recoveries,
any change of a resource that was Ready, a pause; not a new resource's first Ready nor its wait for its parent on
the way), and when a wait for a parent is written at all. A bulk apply makes these by the thousand."""

from __future__ import annotations

import datetime as dt

import pytest

from app.api.dnsrecord import DNSRecord
from reconcilers.waiting import WAIT_GRACE, new_and_waiting_for_a_parent
from reconcilers.writer import worth_an_event


@pytest.mark.parametrize(
    ("before", "status", "reason", "event"),
    [
        (None, "True", "Synced", False),  # created: its status says so; an Event each would be a third write
        (None, "False", "ZoneNotReady", False),  # on its way: the Zone's own Event says what is wrong
        ("ZoneNotReady", "True", "Synced", False),  # came up once its Zone was Ready
        (None, "True", "Paused", True),  # created paused: no Cloudflare call is made, which a user should see
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


def test_a_new_resource_waiting_for_its_parent_says_so_only_if_the_wait_lasts() -> None:
    """A DNSRecord applied with its Zone writes no `ZoneNotReady` status in its first seconds (the Zone's Ready
    wakes it): one status write per record less in a bulk apply. A wait that lasts, a resource that already has a
    status, or a wait for something other than a parent is written at once."""
    created = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    record = DNSRecord.model_validate(
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "DNSRecord",
            "metadata": {"name": "www", "namespace": "demo", "creationTimestamp": created.isoformat()},
            "spec": {"zoneRef": {"name": "example"}, "name": "www.example.com", "type": "A", "content": "192.0.2.1"},
        }
    )
    held = new_and_waiting_for_a_parent(record, "ZoneNotReady", created + dt.timedelta(seconds=3))
    assert held == pytest.approx(WAIT_GRACE - 3)
    assert new_and_waiting_for_a_parent(record, "ZoneNotReady", created + dt.timedelta(seconds=WAIT_GRACE)) is None
    assert new_and_waiting_for_a_parent(record, "SecretNotFound", created + dt.timedelta(seconds=1)) is None
    record.status.set_condition("False", "ZoneNotReady", "waiting", observed_generation=1)
    assert new_and_waiting_for_a_parent(record, "ZoneNotReady", created + dt.timedelta(seconds=1)) is None
