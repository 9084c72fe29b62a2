"""Every reply Cloudflare (or something in front of it) can give becomes a result or one typed error."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from app.cloudflare import (
    CODE_CLASSES,
    BadResponse,
    CloudflareClient,
    CloudflareError,
    Conflict,
    InvalidToken,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    RateLimited,
    Terminal,
    Transient,
    classify,
)
from app.cloudflare.errors import ErrorDetail
from tests.unit.cloudflare.helpers import fail, ok


@pytest.mark.parametrize(
    ("status", "body", "expected", "codes"),
    [
        (404, fail((81044, "Record does not exist.")), NotFound, (81044,)),
        (404, fail((10003, "could not find entrypoint ruleset in the http_ratelimit phase")), NotFound, (10003,)),
        (400, fail((7003, "Could not route to /zones/x"), (7000, "No route for that URI")), NotFound, (7003, 7000)),
        (400, fail((81058, "An identical record already exists.")), Conflict, (81058,)),
        (400, fail((81057, "Record already exists.")), Conflict, (81057,)),
        (400, fail((81053, "An A, AAAA, or CNAME record with that host already exists.")), Conflict, (81053,)),
        (400, fail((1061, "example.com already exists")), Conflict, (1061,)),
        (400, fail((10014, "a namespace with this account ID and title already exists")), Conflict, (10014,)),
        (400, fail((20217, "'zone' is not a valid value for kind")), Conflict, (20217,)),
        (409, fail((10004, "The bucket you tried to create already exists, and you own it")), Conflict, (10004,)),
        (409, fail((1013, "You already have a tunnel with this name")), Conflict, (1013,)),
        (409, fail((12345, "some other conflict")), Conflict, (12345,)),
        (409, fail((10008, "The bucket you tried to delete is not empty")), Terminal, (10008,)),
        (401, fail((1000, "Invalid API Token")), InvalidToken, (1000,)),
        (400, fail((1000, "Invalid API Token")), InvalidToken, (1000,)),
        (403, fail((9106, "Authentication failed")), InvalidToken, (9106,)),
        (403, fail((10000, "Authentication error")), PermissionDenied, (10000,)),
        (403, fail((9109, "Unauthorized to access requested resource")), PermissionDenied, (9109,)),
        (403, fail((10023, "workers.api.error.unauthorized")), PermissionDenied, (10023,)),
        (400, fail((81045, "Record quota exceeded.")), QuotaExceeded, (81045,)),
        (400, fail((7406, "quota reached")), QuotaExceeded, (7406,)),
        (400, fail((9005, "Content for A record is invalid")), Terminal, (9005,)),
        (422, fail((10021, "Uncaught Error: boom")), Terminal, (10021,)),
        (500, fail((10001, "Internal error")), Transient, (10001,)),
        (503, fail((10001, "Service unavailable")), Transient, (10001,)),
        (408, fail((10001, "Request timeout")), Transient, (10001,)),
        (200, fail((81058, "An identical record already exists.")), Conflict, (81058,)),
        (200, fail((1234, "refused with a 200")), Terminal, (1234,)),
    ],
)
async def test_error_classes(
    client: CloudflareClient,
    api: respx.MockRouter,
    status: int,
    body: dict[str, Any],
    expected: type[CloudflareError],
    codes: tuple[int, ...],
) -> None:
    api.get("/zones/z1/dns_records/r1").respond(status, json=body, headers={"cf-ray": "8a1b2c3d4e5f-AMS"})
    with pytest.raises(CloudflareError) as caught:
        await client.get_dns_record("z1", "r1")
    error = caught.value
    assert type(error) is expected
    assert error.status == status
    assert error.codes == codes
    assert error.messages == tuple(entry["message"] for entry in body["errors"])
    assert error.method == "GET"
    assert error.path == "/zones/z1/dns_records/r1"
    assert error.ray_id == "8a1b2c3d4e5f-AMS"
    assert str(codes[0]) in str(error)


def test_every_table_entry_is_a_client_error_class() -> None:
    for code, cls in CODE_CLASSES.items():
        assert issubclass(cls, CloudflareError)
        assert classify(400, [ErrorDetail(code=code, message="")]) is cls
        # Status first: a 404 is not-found, a 429 rate-limited and a 5xx transient whatever the code says.
        assert classify(404, [ErrorDetail(code=code, message="")]) is NotFound
        assert classify(429, [ErrorDetail(code=code, message="")]) is RateLimited
        assert classify(502, [ErrorDetail(code=code, message="")]) is Transient


def test_codes_in_an_error_chain_count() -> None:
    chained = ErrorDetail(code=6003, message="Invalid request headers", chain=(ErrorDetail(6111, "Invalid format"),))
    assert classify(400, [chained]) is InvalidToken
    assert classify(400, [ErrorDetail(12, "x", chain=(ErrorDetail(81058, "identical"),))]) is Conflict


def test_unexpected_statuses_are_transient() -> None:
    assert classify(301) is Transient
    assert classify(100) is Transient
    assert classify(418) is Terminal


async def test_header_error_chain_is_kept(client: CloudflareClient, api: respx.MockRouter) -> None:
    body = {
        "success": False,
        "errors": [
            {
                "code": 6003,
                "message": "Invalid request headers",
                "error_chain": [{"code": 6111, "message": "Invalid format for Authorization header"}],
            }
        ],
        "messages": [],
        "result": None,
    }
    api.get("/zones/z1").respond(400, json=body)
    with pytest.raises(InvalidToken) as caught:
        await client.get_zone("z1")
    assert caught.value.codes == (6003, 6111)
    assert "6111" in str(caught.value)


async def test_rate_limited_carries_retry_after(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").respond(
        429, json=fail((971, "Please wait and consider throttling your request speed")), headers={"Retry-After": "42"}
    )
    with pytest.raises(RateLimited) as caught:
        await client.get_zone("z1")
    assert caught.value.retry_after == 42
    assert caught.value.codes == (971,)
    assert caught.value.status == 429


async def test_rate_limited_without_retry_after_waits_a_window(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").respond(429, json=fail((971, "Please wait")))
    with pytest.raises(RateLimited) as caught:
        await client.get_zone("z1")
    assert caught.value.retry_after == client.budget.config.window


@pytest.mark.parametrize(
    ("status", "content", "content_type", "fragment"),
    [
        (
            502,
            b"<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>",
            "text/html",
            "502 Bad Gateway",
        ),
        (200, b'{"success": true, "errors": [], "result": {"id": "z1", "na', "application/json", "invalid JSON"),
        (200, b"", "application/json", "empty body"),
        (200, b"   \n", "application/json", "empty body"),
        (200, b"[1, 2, 3]", "application/json", "without the success"),
        (200, b'{"id": "z1"}', "application/json", "without the success"),
        (200, b"\xff\xfe\x00garbage", "application/octet-stream", "invalid JSON"),
        (404, b"<html>Not Found</html>", "text/html", "Not Found"),
        (403, b"<html>Attention Required! | Cloudflare</html>", "text/html", "Attention Required"),
        (504, b"", "text/plain", "empty body"),
    ],
)
async def test_bodies_that_are_not_an_envelope_are_transient(
    client: CloudflareClient, api: respx.MockRouter, status: int, content: bytes, content_type: str, fragment: str
) -> None:
    api.get("/zones/z1").respond(status, content=content, headers={"content-type": content_type})
    with pytest.raises(BadResponse) as caught:
        await client.get_zone("z1")
    assert isinstance(caught.value, Transient)
    assert caught.value.status == status
    assert fragment in str(caught.value)
    assert client.budget.stats().calls["transient"] == 1


async def test_html_429_is_still_rate_limited(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").respond(429, content=b"<html>slow down</html>", headers={"retry-after": "7"})
    with pytest.raises(RateLimited) as caught:
        await client.get_zone("z1")
    assert caught.value.retry_after == 7


async def test_result_of_the_wrong_shape_is_a_bad_response(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").respond(200, json=ok({"name": "example.com"}))
    with pytest.raises(BadResponse, match="does not fit Zone"):
        await client.get_zone("z1")


async def test_no_content_is_success(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.delete("/zones/z1/rulesets/rs1").respond(204)
    response = await client.request("DELETE", "/zones/z1/rulesets/rs1")
    assert response.result is None
    assert response.status == 204


async def test_network_errors_are_transient(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").mock(side_effect=httpx.ConnectError("connection refused"))
    api.get("/zones/z2").mock(side_effect=httpx.RemoteProtocolError("peer closed connection"))
    with pytest.raises(Transient) as refused:
        await client.get_zone("z1")
    with pytest.raises(Transient) as dropped:
        await client.get_zone("z2")
    assert "connection refused" in str(refused.value)
    assert refused.value.status is None
    assert "peer closed" in str(dropped.value)
    assert client.budget.stats().calls["transient"] == 2


async def test_outcomes_are_counted(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/ok").respond(200, json=ok({"id": "ok", "name": "example.com"}))
    api.get("/zones/gone").respond(404, json=fail((1001, "Invalid zone identifier")))
    api.post("/zones").respond(400, json=fail((1061, "example.com already exists")))
    api.get("/zones/bad").respond(400, json=fail((1, "no")))
    api.get("/zones/slow").respond(429, json=fail((10058, "per-key limit")), headers={"retry-after": "1"})
    api.get("/zones/down").respond(503, json=fail((10001, "down")))
    await client.get_zone("ok")
    for call in (
        client.get_zone("gone"),
        client.create_zone("example.com", "a1"),
        client.get_zone("bad"),
        client.get_zone("slow"),
        client.get_zone("down"),
    ):
        with pytest.raises(CloudflareError):
            await call
    calls = client.budget.stats().calls
    assert calls == {
        "ok": 1,
        "not_found": 1,
        "conflict": 1,
        "terminal": 1,
        "rate_limited": 1,
        "transient": 1,
    }
