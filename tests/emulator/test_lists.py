"""Custom IP lists through the official SDK: lists, items written by asynchronous bulk operations, references from
rules, and the Free plan's counts."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.rules import ListCreateResponse
from cloudflare.types.rules.lists import BulkOperationGetResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


def operation(cf: cloudflare.Cloudflare, account: str, operation_id: str) -> Any:
    return conforms(
        cf.rules.lists.bulk_operations.get(operation_id=operation_id, account_id=account), BulkOperationGetResponse
    )


def test_list_create_get_update_delete(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    created = cf.rules.lists.create(account_id=account, kind="ip", name="office", description="HQ")
    assert isinstance(created, ListCreateResponse)
    conforms(created)
    assert (created.name, created.kind, created.num_items, created.num_referencing_filters) == ("office", "ip", 0, 0)
    updated = cf.rules.lists.update(list_id=created.id, account_id=account, description="headquarters")
    assert updated.description == "headquarters"
    assert [item.name for item in cf.rules.lists.list(account_id=account)] == ["office"]
    cf.rules.lists.delete(list_id=created.id, account_id=account)
    with pytest.raises(cloudflare.NotFoundError):
        cf.rules.lists.get(list_id=created.id, account_id=account)


def test_names_kinds_and_the_free_count(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    with pytest.raises(cloudflare.BadRequestError):
        cf.rules.lists.create(account_id=account, kind="ip", name="Not-Valid")
    with pytest.raises(cloudflare.BadRequestError):
        cf.rules.lists.create(account_id=account, kind="hostname", name="hosts")
    cf.rules.lists.create(account_id=account, kind="ip", name="first")
    with pytest.raises(cloudflare.BadRequestError) as second:
        cf.rules.lists.create(account_id=account, kind="ip", name="second")
    assert codes(second.value) == [10033]
    fresh_emulator.set_options(lists_per_account=10)
    with pytest.raises(cloudflare.BadRequestError) as duplicate:
        cf.rules.lists.create(account_id=account, kind="ip", name="first")
    assert codes(duplicate.value) == [10026]
    assert cf.rules.lists.create(account_id=account, kind="ip", name="second").name == "second"


def test_items_through_bulk_operations(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    lst = cf.rules.lists.create(account_id=account, kind="ip", name="allow")
    added = cf.rules.lists.items.create(
        list_id=lst.id,
        account_id=account,
        body=[{"ip": "198.51.100.0/24", "comment": "office"}, {"ip": "192.0.2.7"}, {"ip": "2001:DB8::/48"}],
    )
    conforms(added)
    done = operation(cf, account, added.operation_id)
    assert done.status == "completed"
    items = list(cf.rules.lists.items.list(list_id=lst.id, account_id=account))
    assert [(i.ip, i.comment) for i in items] == [  # type: ignore[union-attr]
        ("192.0.2.7", None),
        ("198.51.100.0/24", "office"),
        ("2001:db8::/48", None),
    ]
    assert cf.rules.lists.get(list_id=lst.id, account_id=account).num_items == 3

    # Adding an address that is there changes its comment.
    again = cf.rules.lists.items.create(
        list_id=lst.id, account_id=account, body=[{"ip": "192.0.2.7", "comment": "vpn"}]
    )
    assert operation(cf, account, again.operation_id).status == "completed"
    assert [i.comment for i in cf.rules.lists.items.list(list_id=lst.id, account_id=account, search="vpn")] == ["vpn"]  # type: ignore[union-attr]

    first = items[0]
    removed = cf.rules.lists.items.delete(list_id=lst.id, account_id=account, items=[{"id": first.id}])  # type: ignore[union-attr]
    assert removed is not None
    assert operation(cf, account, removed.operation_id).status == "completed"
    replaced = cf.rules.lists.items.update(list_id=lst.id, account_id=account, body=[])
    assert operation(cf, account, replaced.operation_id).status == "completed"
    assert list(cf.rules.lists.items.list(list_id=lst.id, account_id=account)) == []


def test_a_bad_item_fails_the_whole_operation(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    lst = cf.rules.lists.create(account_id=account, kind="ip", name="allow")
    submitted = cf.rules.lists.items.create(
        list_id=lst.id, account_id=account, body=[{"ip": "192.0.2.1"}, {"ip": "10.0.0.0/4"}, {"ip": "2001:db8::1"}]
    )
    failed = operation(cf, account, submitted.operation_id)
    assert failed.status == "failed"
    assert "10.0.0.0/4" in failed.error
    assert list(cf.rules.lists.items.list(list_id=lst.id, account_id=account)) == []


def test_operations_take_polls_and_do_not_overlap(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    fresh_emulator.set_options(list_operation_polls=2)
    lst = cf.rules.lists.create(account_id=account, kind="ip", name="allow")
    submitted = cf.rules.lists.items.create(list_id=lst.id, account_id=account, body=[{"ip": "192.0.2.1"}])
    with pytest.raises(cloudflare.RateLimitError):
        cf.rules.lists.items.create(list_id=lst.id, account_id=account, body=[{"ip": "192.0.2.2"}])
    assert [operation(cf, account, submitted.operation_id).status for _ in range(3)] == [
        "running",
        "running",
        "completed",
    ]
    assert [i.ip for i in cf.rules.lists.items.list(list_id=lst.id, account_id=account)] == ["192.0.2.1"]  # type: ignore[union-attr]


def test_items_page_with_cursors(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    items = [{"ip": f"192.0.2.{i}"} for i in range(30)]
    fresh_emulator.seed({"lists": [{"name": "many", "list_items": items}]})
    lst = next(iter(cf.rules.lists.list(account_id=account)))
    page = cf.rules.lists.items.list(list_id=lst.id, account_id=account, per_page=20)
    assert len(page.result) == 20
    assert len(list(cf.rules.lists.items.list(list_id=lst.id, account_id=account, per_page=20))) == 30


def test_a_rule_may_only_use_lists_the_account_has(
    cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess
) -> None:
    rule = {"action": "block", "expression": "ip.src in $later"}
    with pytest.raises(cloudflare.BadRequestError) as missing:
        cf.rulesets.phases.update(ruleset_phase="http_request_firewall_custom", zone_id=zone.id, rules=[rule])
    assert "$later" in missing.value.errors[0].message
    cf.rules.lists.create(account_id=fresh_emulator.account_id, kind="ip", name="later")
    assert cf.rulesets.phases.update(ruleset_phase="http_request_firewall_custom", zone_id=zone.id, rules=[rule])


def test_a_list_in_use_cannot_be_deleted(cf: cloudflare.Cloudflare, zone: Any, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    lst = cf.rules.lists.create(account_id=account, kind="ip", name="blocked")
    cf.rulesets.phases.update(
        ruleset_phase="http_request_firewall_custom",
        zone_id=zone.id,
        rules=[{"action": "block", "expression": "ip.src in $blocked"}],
    )
    assert cf.rules.lists.get(list_id=lst.id, account_id=account).num_referencing_filters == 1
    with pytest.raises(cloudflare.BadRequestError) as in_use:
        cf.rules.lists.delete(list_id=lst.id, account_id=account)
    assert codes(in_use.value) == [10047]
    cf.rulesets.phases.update(ruleset_phase="http_request_firewall_custom", zone_id=zone.id, rules=[])
    assert cf.rules.lists.delete(list_id=lst.id, account_id=account) is not None


def test_dump_seeds_back(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    lst = cf.rules.lists.create(account_id=account, kind="ip", name="kept")
    cf.rules.lists.items.create(list_id=lst.id, account_id=account, body=[{"ip": "192.0.2.1", "comment": "c"}])
    zone = cf.zones.create(name="example.com", account={"id": account})
    cf.rulesets.phases.update(
        ruleset_phase="http_request_firewall_custom",
        zone_id=zone.id,
        rules=[{"action": "block", "expression": "ip.src in $kept"}],
    )
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump
