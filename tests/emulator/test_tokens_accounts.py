"""Token verification and accounts, through the official SDK."""

from __future__ import annotations

import cloudflare
import httpx
import pytest
from cloudflare.types.accounts import Account

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess

OTHER_ACCOUNT = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"


def test_user_token_verifies(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    raw = cf.user.tokens.with_raw_response.verify()
    verified = raw.parse()
    assert verified is not None
    conforms(verified)
    assert (verified.id, verified.status) == (fresh_emulator.token_id, "active")
    body = raw.http_response.json()
    assert body["messages"] == [{"code": 10000, "message": "This API Token is valid and active", "type": None}]


def test_account_token_verifies_only_at_its_account(fresh_emulator: EmulatorProcess) -> None:
    token = fresh_emulator.add_token(["dns:read"], owner="account", account_id=fresh_emulator.account_id)
    cf = fresh_emulator.client(token["value"])

    verified = cf.accounts.tokens.verify(account_id=fresh_emulator.account_id)
    assert verified is not None
    assert (verified.id, verified.status) == (token["id"], "active")

    # The user endpoint does not know account-owned tokens: that is how clients tell the two kinds apart.
    with pytest.raises(cloudflare.AuthenticationError) as refused:
        cf.user.tokens.verify()
    assert refused.value.status_code == 401
    assert [e.code for e in refused.value.errors] == [1000]


def test_user_token_is_unknown_at_the_account_endpoint(
    cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess
) -> None:
    with pytest.raises(cloudflare.AuthenticationError) as refused:
        cf.accounts.tokens.verify(account_id=fresh_emulator.account_id)
    assert [e.code for e in refused.value.errors] == [1000]


def test_unknown_token(fresh_emulator: EmulatorProcess) -> None:
    cf = fresh_emulator.client("no-such-token")
    with pytest.raises(cloudflare.AuthenticationError) as at_verify:
        cf.user.tokens.verify()
    assert [e.code for e in at_verify.value.errors] == [1000]
    assert at_verify.value.body == {
        "success": False,
        "errors": [{"code": 1000, "message": "Invalid API Token"}],
        "messages": [],
        "result": None,
    }
    with pytest.raises(cloudflare.PermissionDeniedError) as at_zones:
        cf.zones.list()
    assert [e.code for e in at_zones.value.errors] == [9109]
    with pytest.raises(cloudflare.PermissionDeniedError) as at_dns:
        cf.dns.records.list(zone_id=OTHER_ACCOUNT)
    assert [e.code for e in at_dns.value.errors] == [10000]


def test_disabled_and_expired_tokens(fresh_emulator: EmulatorProcess) -> None:
    disabled = fresh_emulator.add_token(["*"], status="disabled")
    expired = fresh_emulator.add_token(["*"], expires_on="2020-01-01T00:00:00Z")
    for token, status in ((disabled, "disabled"), (expired, "expired")):
        cf = fresh_emulator.client(token["value"])
        verified = cf.user.tokens.verify()
        assert verified is not None
        assert verified.status == status
        with pytest.raises(cloudflare.PermissionDeniedError):
            cf.accounts.get(account_id=fresh_emulator.account_id)


def test_malformed_authorization(fresh_emulator: EmulatorProcess) -> None:
    with httpx.Client(base_url=fresh_emulator.base_url) as http:
        bad_scheme = http.get("/zones", headers={"Authorization": f"Token {fresh_emulator.token}"})
        nothing = http.get("/zones")
    assert bad_scheme.status_code == 400
    assert bad_scheme.json()["errors"][0]["code"] == 6003
    assert bad_scheme.json()["errors"][0]["error_chain"][0]["code"] == 6111
    assert nothing.status_code == 400
    assert [e["code"] for e in nothing.json()["errors"]] == [9106, 9107]


def test_account_get_list_update(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = cf.accounts.get(account_id=fresh_emulator.account_id)
    assert isinstance(account, Account)
    conforms(account)
    assert account.name == "kflare tests"

    updated = cf.accounts.update(account_id=account.id, id=account.id, name="renamed", type="standard")
    assert updated is not None
    assert updated.name == "renamed"
    assert cf.accounts.get(account_id=account.id).name == "renamed"


def test_account_list_pages(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed({"accounts": [{"name": f"acct-{i:02}"} for i in range(11)]})
    first = cf.accounts.list(per_page=5)
    assert len(first.result) == 5
    assert first.result_info is not None
    assert first.result_info.total_count == 12
    names = [a.name for a in cf.accounts.list(per_page=5)]  # auto-paging over pages of 5, 5 and 2
    assert names == sorted([f"acct-{i:02}" for i in range(11)] + ["kflare tests"])
    # The SDK stops at the first empty page, so it asked for a fourth one.
    assert len(fresh_emulator.calls(method="GET", path=r"/accounts$")) == 1 + 4
    assert [a.name for a in cf.accounts.list(name="contains:acct-1")] == ["acct-10"]


def test_account_create_and_delete(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    created = cf.accounts.create(name="new account", type="standard")
    assert created is not None
    conforms(created)
    zone = cf.zones.create(name="gone.example", account={"id": created.id})
    deleted = cf.accounts.delete(account_id=created.id)
    assert deleted is not None
    assert deleted.id == created.id
    with pytest.raises(cloudflare.NotFoundError):
        cf.accounts.get(account_id=created.id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.zones.get(zone_id=zone.id)


def test_account_scope_and_permissions(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.seed({"accounts": [{"id": OTHER_ACCOUNT, "name": "someone else"}]})
    reader = fresh_emulator.add_token(["zone:read"], accounts=[fresh_emulator.account_id])
    cf = fresh_emulator.client(reader["value"])

    assert [a.id for a in cf.accounts.list()] == [fresh_emulator.account_id]
    with pytest.raises(cloudflare.PermissionDeniedError) as other:
        cf.accounts.get(account_id=OTHER_ACCOUNT)
    assert [e.code for e in other.value.errors] == [9109]
    with pytest.raises(cloudflare.PermissionDeniedError):
        cf.accounts.update(
            account_id=fresh_emulator.account_id, id=fresh_emulator.account_id, name="x", type="standard"
        )
    with pytest.raises(cloudflare.PermissionDeniedError):
        cf.accounts.create(name="not allowed")


def test_account_list_holds_what_the_token_reaches_and_says_how_many(fresh_emulator: EmulatorProcess) -> None:
    """What a client that wants the one account of a token reads: one page, and its total."""
    fresh_emulator.seed({"accounts": [{"id": OTHER_ACCOUNT, "name": "someone else"}]})
    every = fresh_emulator.client().accounts.list(per_page=50)
    assert sorted(a.id for a in every.result) == sorted([fresh_emulator.account_id, OTHER_ACCOUNT])
    assert every.result_info is not None
    assert every.result_info.total_count == 2
    for account in every.result:
        conforms(account)

    one = fresh_emulator.client(fresh_emulator.add_token(["*"], accounts=[OTHER_ACCOUNT])["value"])
    page = one.accounts.list(per_page=50)
    assert [(a.id, a.name) for a in page.result] == [(OTHER_ACCOUNT, "someone else")]
    assert page.result_info is not None
    assert page.result_info.total_count == 1

    none = fresh_emulator.client(fresh_emulator.add_token(["*"], accounts=[])["value"])
    empty = none.accounts.list(per_page=50)
    assert empty.result == []
    assert empty.result_info is not None
    assert empty.result_info.total_count == 0


def test_account_owned_tokens_cannot_list_accounts(fresh_emulator: EmulatorProcess) -> None:
    token = fresh_emulator.add_token(["*"], owner="account", account_id=fresh_emulator.account_id)
    cf = fresh_emulator.client(token["value"])
    with pytest.raises(cloudflare.BadRequestError) as refused:
        cf.accounts.list()
    assert [e.code for e in refused.value.errors] == [1001]
    assert cf.accounts.get(account_id=fresh_emulator.account_id) is not None


def test_malformed_and_unknown_account_ids(cf: cloudflare.Cloudflare) -> None:
    with pytest.raises(cloudflare.BadRequestError) as malformed:
        cf.accounts.get(account_id="not-an-id")
    assert [e.code for e in malformed.value.errors] == [7003, 7000]
    with pytest.raises(cloudflare.NotFoundError):
        cf.accounts.get(account_id=OTHER_ACCOUNT)
