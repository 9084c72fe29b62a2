"""Every bound of a call ends it with `DeadlineExceeded` naming the bound (its phase), not a later one.

Which bound ended a call is read from the error, not from a clock: a call is given far longer than its bound
(`NEVER`) only so that one no bound ends fails the test instead of hanging it."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
import respx

from app.cloudflare import (
    CloudflareClient,
    CloudflareSession,
    DeadlineExceeded,
    HttpConfig,
    NetworkError,
    Timeouts,
    Transient,
)
from tests.unit.cloudflare.helpers import BASE, TOKEN, ok
from tests.unit.cloudflare.servers import TcpServer, answer, dribble_body, envelope, hang_after_request, silent

pytestmark = pytest.mark.heavy

NEVER = 30.0
"""Seconds after which a call counts as one no bound ended: far above every bound these tests set."""


async def test_connect_timeout(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").mock(side_effect=httpx.ConnectTimeout("timed out"))
    with pytest.raises(DeadlineExceeded) as caught:
        await client.get_zone("z1")
    assert caught.value.phase == "connect"
    assert caught.value.sent is False
    assert "connecting took longer than 30 s" in str(caught.value)
    stats = client.budget.stats()
    assert stats.calls["transient"] == 1
    assert stats.remaining == stats.capacity  # nothing reached Cloudflare, so nothing is counted in the window


async def test_read_timeout_is_the_response_start_bound(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").mock(side_effect=httpx.ReadTimeout("timed out"))
    with pytest.raises(DeadlineExceeded) as caught:
        await client.get_zone("z1")
    assert caught.value.phase == "response_start"
    assert caught.value.sent is True
    assert "no response within 60 s" in str(caught.value)


async def test_write_and_pool_timeouts(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.put("/zones/z1/thing").mock(side_effect=httpx.WriteTimeout("timed out"))
    api.get("/zones/z1/thing").mock(side_effect=httpx.PoolTimeout("timed out"))
    with pytest.raises(DeadlineExceeded) as write:
        await client.request("PUT", "/zones/z1/thing", content=b"x")
    with pytest.raises(DeadlineExceeded) as pool:
        await client.request("GET", "/zones/z1/thing")
    assert write.value.phase == "send"
    assert pool.value.phase == "pool"


async def test_whole_request_deadline(api: respx.MockRouter) -> None:
    never = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        await never.wait()
        raise AssertionError("unreachable")

    api.get("/zones/z1").mock(side_effect=hang)
    config = HttpConfig(base_url=BASE, timeouts=Timeouts(request=0.3))
    async with CloudflareSession(config) as session:
        client = session.client(TOKEN)
        with pytest.raises(DeadlineExceeded) as caught:
            async with asyncio.timeout(NEVER):
                await client.get_zone("z1")
    assert caught.value.phase == "request"
    assert "whole request took longer than 0.3 s" in str(caught.value)


def _session(base_url: str, **bounds: float) -> CloudflareSession:
    return CloudflareSession(HttpConfig(base_url=base_url, timeouts=Timeouts(**bounds)))


async def test_response_start_bound_against_a_server_that_never_answers() -> None:
    async with TcpServer(hang_after_request) as server, _session(server.url(), response_start=0.3) as session:
        client = session.client(TOKEN)
        with pytest.raises(DeadlineExceeded) as caught:
            async with asyncio.timeout(NEVER):
                await client.get_zone("z1")
    assert caught.value.phase == "response_start"
    assert caught.value.sent is True


async def test_tls_handshake_bound_against_a_server_that_says_nothing() -> None:
    async with TcpServer(silent) as server, _session(server.url("https"), tls=0.3, connect=20) as session:
        client = session.client(TOKEN)
        with pytest.raises(DeadlineExceeded) as caught:
            async with asyncio.timeout(NEVER):
                await client.get_zone("z1")
    assert caught.value.phase == "tls"
    assert caught.value.sent is False
    assert "TLS handshake took longer than 0.3 s" in str(caught.value)


async def test_whole_request_bound_against_a_body_that_never_ends() -> None:
    async with TcpServer(dribble_body) as server, _session(server.url(), request=0.5, response_start=30) as session:
        client = session.client(TOKEN)
        with pytest.raises(DeadlineExceeded) as caught:
            async with asyncio.timeout(NEVER):
                await client.get_zone("z1")
    assert caught.value.phase == "request"


async def test_whole_request_bound_covers_a_large_upload() -> None:
    async with TcpServer(hang_after_request) as server, _session(server.url(), request=0.5, response_start=30) as s:
        client = s.client(TOKEN)
        with pytest.raises(DeadlineExceeded) as caught:
            async with asyncio.timeout(NEVER):
                await client.request("PUT", "/accounts/a/workers/scripts/big", content=b"x" * (64 * 1024 * 1024))
    assert caught.value.phase == "request"


async def test_refused_connection_is_a_network_error_not_sent() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with _session(f"http://127.0.0.1:{port}/client/v4") as session:
        client = session.client(TOKEN)
        with pytest.raises(NetworkError) as caught:
            await client.get_zone("z1")
    assert isinstance(caught.value, Transient)
    assert caught.value.sent is False


async def test_bounds_do_not_disturb_a_normal_call() -> None:
    body = envelope({"id": "z1", "name": "example.com"})
    async with TcpServer(answer(body)) as server, _session(server.url(), response_start=5, request=10) as session:
        client = session.client(TOKEN)
        zones = [await client.get_zone("z1") for _ in range(3)]
    assert [zone.name for zone in zones] == ["example.com"] * 3
    assert server.connections == 1  # the connection is kept and reused


async def test_every_call_has_a_timeout(client: CloudflareClient, api: respx.MockRouter) -> None:
    api.get("/zones/z1").respond(200, json=ok({"id": "z1", "name": "example.com"}))
    await client.get_zone("z1")
    timeout = api.calls.last.request.extensions["timeout"]
    assert all(value is not None for value in timeout.values())
