"""The typed helpers send what Cloudflare expects and return typed results."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from app import __version__
from app.cloudflare import (
    BudgetConfig,
    CloudflareClient,
    CloudflareError,
    CloudflareSession,
    DNSBatchResult,
    HttpConfig,
    InvalidToken,
    NotFound,
    PermissionDenied,
    Transient,
)
from app.cloudflare.http import user_agent
from tests.unit.cloudflare.helpers import BASE, OTHER_TOKEN, TOKEN, fail, ok

RECORD = {
    "id": "r1",
    "name": "www.example.com",
    "type": "A",
    "content": "192.0.2.1",
    "ttl": 1,
    "proxied": True,
    "meta": {"auto_added": False},
}


async def test_sends_the_token_as_a_bearer_header(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/user/tokens/verify").respond(200, json=ok({"id": "t1", "status": "active"}))
    status = await client.verify_token()
    assert status.id == "t1"
    assert status.active
    request = route.calls.last.request
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["user-agent"].startswith("kflare/")


async def test_each_replica_names_itself_in_its_user_agent(api: respx.MockRouter) -> None:
    """Replicas share a token; Cloudflare's side (and the emulator's call log) tells them apart by this."""
    route = api.get("/user/tokens/verify").respond(200, json=ok({"id": "t1", "status": "active"}))
    config = HttpConfig(base_url=BASE, user_agent=user_agent("kflare-7d9f-abcde_1a2b3c4d"))
    async with CloudflareSession(config, BudgetConfig()) as session:
        await session.client(TOKEN).verify_token()
    assert route.calls.last.request.headers["user-agent"] == f"kflare/{__version__} (kflare-7d9f-abcde_1a2b3c4d)"


async def test_verify_falls_back_to_the_account_for_an_account_owned_token(
    client: CloudflareClient, api: respx.MockRouter
) -> None:
    api.get("/user/tokens/verify").respond(401, json=fail((1000, "Invalid API Token")))
    account = api.get("/accounts/a1/tokens/verify").respond(200, json=ok({"id": "t2", "status": "active"}))
    assert (await client.verify_token(account_id="a1")).id == "t2"
    assert account.call_count == 1
    with pytest.raises(InvalidToken):
        await client.verify_token()


async def test_verify_does_not_fall_back_on_a_permission_error(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/user/tokens/verify").respond(403, json=fail((9109, "Unauthorized to access requested resource")))
    account = api.get("/accounts/a1/tokens/verify")
    with pytest.raises(PermissionDenied):
        await client.verify_token(account_id="a1")
    assert account.call_count == 0


async def test_accounts(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/accounts/a1").respond(200, json=ok({"id": "a1", "name": "Example", "type": "standard"}))
    assert (await client.get_account("a1")).name == "Example"


async def test_listing_accounts_is_one_page_with_the_total(client: CloudflareClient, api: respx.MockRouter) -> None:
    page = [{"id": f"a{n}", "name": f"Example {n}"} for n in range(2)]
    route = api.get("/accounts").respond(
        200, json=ok(page, {"page": 1, "per_page": 2, "count": 2, "total_count": 7, "total_pages": 4})
    )
    accounts, total = await client.list_accounts(per_page=2)
    assert ([a.id for a in accounts], total) == (["a0", "a1"], 7)
    assert route.call_count == 1
    assert dict(route.calls.last.request.url.params) == {"page": "1", "per_page": "2"}

    api.get("/accounts").respond(200, json=ok(page[:1]))
    assert (await client.list_accounts())[1] == 1  # no result_info: the page says how many


async def test_listing_accounts_with_an_account_owned_token_is_refused(
    client: CloudflareClient, api: respx.MockRouter
) -> None:
    api.get("/accounts").respond(
        400, json=fail((1001, "List accounts endpoint does not support account owned tokens."))
    )
    with pytest.raises(CloudflareError) as refused:
        await client.list_accounts()
    assert refused.value.codes == (1001,)


async def test_zone_calls(client: CloudflareClient, api: respx.MockRouter) -> None:
    zone = {
        "id": "z1",
        "name": "example.com",
        "status": "pending",
        "account": {"id": "a1", "name": "Example"},
        "name_servers": ["ns1.example.net", "ns2.example.net"],
        "plan": {"id": "free", "name": "Free Website"},
        "development_mode": 0,
    }
    create = api.post("/zones").respond(200, json=ok(zone))
    edit = api.patch("/zones/z1").respond(200, json=ok({**zone, "paused": True}))
    delete = api.delete("/zones/z1").respond(200, json=ok({"id": "z1"}))
    created = await client.create_zone("example.com", "a1")
    assert json.loads(create.calls.last.request.content) == {
        "name": "example.com",
        "account": {"id": "a1"},
        "type": "full",
    }
    assert created.account.id == "a1"
    assert created.name_servers == ["ns1.example.net", "ns2.example.net"]
    assert created.model_extra == {"development_mode": 0}  # unknown fields are kept
    assert (await client.edit_zone("z1", {"paused": True})).paused
    assert json.loads(edit.calls.last.request.content) == {"paused": True}
    assert await client.delete_zone("z1") == "z1"
    assert delete.call_count == 1


async def test_dns_record_calls(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1/dns_records/r1").respond(200, json=ok(RECORD))
    post = api.post("/zones/z1/dns_records").respond(200, json=ok(RECORD))
    patch = api.patch("/zones/z1/dns_records/r1").respond(200, json=ok({**RECORD, "ttl": 300}))
    api.delete("/zones/z1/dns_records/r1").respond(200, json=ok({"id": "r1"}))
    record = await client.get_dns_record("z1", "r1")
    assert (record.name, record.type, record.content, record.proxied) == ("www.example.com", "A", "192.0.2.1", True)
    body = {"name": "www", "type": "A", "content": "192.0.2.1", "ttl": 1, "proxied": True}
    await client.create_dns_record("z1", body)
    assert json.loads(post.calls.last.request.content) == body
    assert (await client.patch_dns_record("z1", "r1", {"ttl": 300})).ttl == 300
    assert json.loads(patch.calls.last.request.content) == {"ttl": 300}
    assert await client.delete_dns_record("z1", "r1") == "r1"


async def test_dns_batch(client: CloudflareClient, api: respx.MockRouter) -> None:
    result = {"deletes": [RECORD], "patches": [], "puts": [], "posts": [{**RECORD, "id": "r2"}]}
    route = api.post("/zones/z1/dns_records/batch").respond(200, json=ok(result))
    batch = await client.batch_dns_records(
        "z1", deletes=["r1"], posts=[{"name": "www", "type": "A", "content": "192.0.2.2", "ttl": 1}]
    )
    assert isinstance(batch, DNSBatchResult)
    assert [r.id for r in batch.deletes] == ["r1"]
    assert [r.id for r in batch.posts] == ["r2"]
    assert json.loads(route.calls.last.request.content) == {
        "deletes": [{"id": "r1"}],
        "posts": [{"name": "www", "type": "A", "content": "192.0.2.2", "ttl": 1}],
    }


async def test_dns_filters_are_encoded_the_cloudflare_way(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get("/zones/z1/dns_records").respond(200, json=ok([RECORD], {"page": 1, "total_pages": 1}))
    filters = {"type": "A", "name.exact": "www.example.com", "proxied": True, "tag": ["a:1", "b:2"], "comment": None}
    _ = [r async for r in client.list_dns_records("z1", filters=filters)]
    params = route.calls.last.request.url.params
    assert params["type"] == "A"
    assert params["name.exact"] == "www.example.com"
    assert params["proxied"] == "true"
    assert params.get_list("tag") == ["a:1", "b:2"]
    assert "comment" not in params


async def test_ids_cannot_change_the_path(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.get(url__regex=r".*").respond(404, json=fail((1001, "Invalid zone identifier")))
    with pytest.raises(NotFound):
        await client.get_zone("../accounts/a1")
    assert route.calls.last.request.url.raw_path == b"/client/v4/zones/..%2Faccounts%2Fa1"
    with pytest.raises(ValueError, match="empty identifier"):
        await client.get_zone("")


@pytest.mark.parametrize(
    ("read", "path"),
    [
        (lambda c: c.get_kv_namespace("a1", "../x"), b"/client/v4/accounts/a1/storage/kv/namespaces/..%2Fx"),
        (lambda c: c.get_d1_database("a1", "../x"), b"/client/v4/accounts/a1/d1/database/..%2Fx"),
        (lambda c: c.get_r2_bucket("a1", "../x", "eu"), b"/client/v4/accounts/a1/r2/buckets/..%2Fx"),
        (lambda c: c.subscribe_zone("../x", "pro", first=True), b"/client/v4/zones/..%2Fx/subscription"),
    ],
)
async def test_every_read_of_one_object_escapes_its_id(
    client: CloudflareClient, api: respx.MockRouter, read: Any, path: bytes
) -> None:
    route = api.route(url__regex=r".*").respond(404, json=fail((1001, "not found")))
    with pytest.raises(NotFound):
        await read(client)
    assert route.calls.last.request.url.raw_path == path


async def test_raw_calls_for_bodies_that_are_not_envelopes(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/accounts/a1/workers/scripts/w").respond(200, content=b"export default {}", headers={"etag": '"1"'})
    api.get("/accounts/a1/workers/scripts/missing").respond(404, json=fail((10007, "script_not_found")))
    reply = await client.request_raw("GET", "/accounts/a1/workers/scripts/w")
    assert reply.body == b"export default {}"
    assert reply.headers["etag"] == '"1"'
    with pytest.raises(NotFound):
        await client.request_raw("GET", "/accounts/a1/workers/scripts/missing")


async def test_multipart_upload(client: CloudflareClient, api: respx.MockRouter) -> None:
    route = api.put("/accounts/a1/workers/scripts/w").respond(200, json=ok({"id": "w", "etag": "e"}))
    metadata = json.dumps({"main_module": "index.js", "compatibility_date": "2025-01-01"})
    response = await client.request(
        "PUT",
        "/accounts/a1/workers/scripts/w",
        files=[
            ("metadata", (None, metadata, "application/json")),
            ("index.js", ("index.js", b"export default {}", "application/javascript+module")),
        ],
    )
    assert response.result["etag"] == "e"
    request = route.calls.last.request
    assert request.headers["content-type"].startswith("multipart/form-data")
    assert b"export default {}" in request.content


async def test_clients_share_a_budget_by_token_or_by_key(session: CloudflareSession) -> None:
    assert session.client(TOKEN).budget is session.client(TOKEN).budget
    assert session.client(TOKEN).budget is not session.client(OTHER_TOKEN).budget
    grouped = session.client(TOKEN, budget_key="user-1")
    assert grouped.budget is session.client(OTHER_TOKEN, budget_key="user-1").budget
    assert grouped.budget.name == "user-1"


async def test_messages_are_kept(client: CloudflareClient, api: respx.MockRouter) -> None:
    body = ok({"id": "t", "status": "active"})
    body["messages"] = [{"code": 10000, "message": "This API Token is valid and active", "type": None}]
    api.get("/user/tokens/verify").respond(200, json=body)
    response = await client.request("GET", "/user/tokens/verify")
    assert response.messages[0].message == "This API Token is valid and active"
    assert response.messages[0].code == 10000


async def test_http_errors_in_the_request_itself(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").mock(side_effect=httpx.DecodingError("bad gzip"))
    with pytest.raises(Transient, match="bad gzip"):
        await client.get_zone("z1")
