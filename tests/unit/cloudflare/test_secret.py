"""The token never shows: not in a repr or str, not in an error message (even one that echoes it back), not in a
log line at any level, including the HTTP/2 libraries' debug logs."""

from __future__ import annotations

import copy
import logging
import pickle

import httpx
import pytest
import respx
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH

from app.cloudflare import CloudflareError, CloudflareSession, HttpConfig, Secret
from tests.unit.cloudflare.helpers import TOKEN, fail, ok
from tests.unit.cloudflare.servers import Certificates, H2Server


def test_secret_hides_its_value() -> None:
    secret = Secret(TOKEN)
    assert secret.reveal() == TOKEN
    for text in (repr(secret), str(secret), f"{secret}", f"{secret!r}", f"{secret:>80}", str([secret])):
        assert TOKEN not in text
        assert secret.fingerprint in text
    assert len(secret.fingerprint) == 12
    assert TOKEN not in secret.key
    assert Secret(f"  {TOKEN}\n") == secret
    assert Secret.of(secret) is secret
    assert copy.deepcopy(secret) is secret
    with pytest.raises(TypeError):
        pickle.dumps(secret)
    with pytest.raises(AttributeError):
        secret._value = "x"


def test_a_malformed_token_is_refused_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="the token is empty"):
        Secret("   ")
    with pytest.raises(ValueError, match="other than visible ASCII") as caught:
        Secret("abc\x00def-secret-part")
    assert "secret-part" not in str(caught.value)


def test_redact() -> None:
    secret = Secret(TOKEN)
    assert TOKEN not in secret.redact(f"bad token {TOKEN} given")
    assert secret.redact("nothing here") == "nothing here"


@pytest.fixture
def everything_logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    # `app.logs.configure` (run in process by earlier tests) quiets these to WARNING; here they must say everything.
    for noisy in ("httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=noisy)
    return caplog


def _leaks(caplog: pytest.LogCaptureFixture, *needles: str | bytes) -> list[str]:
    found = []
    for record in caplog.records:
        texts = [record.getMessage(), repr(record.args), repr(record.__dict__)]
        for needle in needles:
            text_needle = needle if isinstance(needle, str) else repr(needle)[2:-1]
            if any(text_needle in text for text in texts):
                found.append(f"{record.name}: {record.getMessage()[:200]}")
    return found


async def test_no_leak_in_reprs_errors_or_logs(everything_logged: pytest.LogCaptureFixture) -> None:
    base = "https://api.cloudflare.test/client/v4"
    async with CloudflareSession(HttpConfig(base_url=base)) as session:
        client = session.client(TOKEN)
        with respx.mock(base_url=base) as api:
            api.get("/user/tokens/verify").respond(200, json=ok({"id": "t", "status": "active"}))
            # A server (or something in between) that quotes the token back, in every place it could.
            api.get("/zones/echo").respond(
                400,
                json={
                    "success": False,
                    "errors": [
                        {
                            "code": 6003,
                            "message": f"Invalid request headers: Bearer {TOKEN}",
                            "source": {"pointer": f"/headers/{TOKEN}"},
                            "error_chain": [{"code": 6111, "message": f"bad format {TOKEN}"}],
                        }
                    ],
                    "messages": [],
                    "result": None,
                },
            )
            api.get("/zones/html").respond(502, content=f"<html>upstream said {TOKEN}</html>".encode())
            api.get("/zones/limited").respond(429, json=fail((971, f"slow down {TOKEN}")), headers={"retry-after": "0"})
            api.get("/zones/net").mock(side_effect=httpx.ConnectError(f"cannot connect with {TOKEN}"))
            api.get("/zones/shape").respond(200, json=ok({"id": TOKEN}))
            await client.verify_token()
            errors: list[CloudflareError] = []
            for path in ("/zones/echo", "/zones/html", "/zones/limited", "/zones/net"):
                with pytest.raises(CloudflareError) as caught:
                    await client.request("GET", path)
                errors.append(caught.value)
            with pytest.raises(CloudflareError) as caught:
                await client.get_zone("shape")
            errors.append(caught.value)
        texts = [repr(session), repr(client), repr(client.budget), repr(session.budgets), repr(session.http)]
        texts += [repr(stats) for stats in session.budget_stats()]
        for error in errors:
            texts += [str(error), repr(error), repr(error.errors), str(error.args)]
        for text in texts:
            assert TOKEN not in text, text
        assert errors[0].codes == (6003, 6111)
    assert everything_logged.records  # something was logged...
    assert _leaks(everything_logged, TOKEN) == []  # ...and none of it holds the token


async def test_no_leak_in_http2_debug_logs(everything_logged: pytest.LogCaptureFixture) -> None:
    encoder = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH)
    huffman_token = encoder.encode(TOKEN.encode())
    huffman_header = encoder.encode(f"Bearer {TOKEN}".encode())
    certificates = Certificates()
    try:
        async with H2Server(certificates) as server:
            config = HttpConfig(base_url=server.url(), verify=certificates.client_context())
            async with CloudflareSession(config) as session:
                client = session.client(TOKEN)
                reply = await client.request_raw("GET", "/user/tokens/verify")
                await client.verify_token()
    finally:
        certificates.cleanup()
    assert reply.http_version == "HTTP/2"
    names = {record.name for record in everything_logged.records}
    assert {"hpack.hpack", "httpcore.http2"} <= names  # the debug logs of the HTTP/2 stack were on
    assert _leaks(everything_logged, TOKEN, huffman_token, huffman_header, huffman_token[:16]) == []
