"""HTTP/2 against a real TLS server: the connection is negotiated as h2, pinged when silent, kept when the ping is
answered, and closed when it is not, failing fast a request stuck on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from app.cloudflare import CloudflareSession, HttpConfig, NetworkError, Timeouts, Transient
from app.cloudflare.keepalive import Keepalive
from tests.unit.cloudflare.helpers import TOKEN
from tests.unit.cloudflare.servers import Certificates, H2Server

pytestmark = pytest.mark.heavy

NEVER = 30.0
"""Seconds after which what a ping bound should end counts as never ended: far above the bounds set here, so the
error's type, not a clock, says which bound ended it."""


@pytest.fixture(scope="module")
def certificates() -> Iterator[Certificates]:
    certs = Certificates()
    yield certs
    certs.cleanup()


def _session(server: H2Server, certificates: Certificates, **bounds: float) -> CloudflareSession:
    config = HttpConfig(base_url=server.url(), verify=certificates.client_context(), timeouts=Timeouts(**bounds))
    return CloudflareSession(config)


async def _until(condition: object, seconds: float) -> None:
    """Wait (polling) for `condition()` for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def _keepalive(session: CloudflareSession) -> Keepalive:
    keepalive = session.http.keepalive
    assert keepalive is not None
    return keepalive


async def test_http2_is_negotiated(certificates: Certificates) -> None:
    async with H2Server(certificates) as server, _session(server, certificates) as session:
        client = session.client(TOKEN)
        reply = await client.request_raw("GET", "/user/tokens/verify")
        status = await client.verify_token()
    assert reply.http_version == "HTTP/2"
    assert status.active
    assert server.connections == 1
    assert server.requests[0][":path"] == "/client/v4/user/tokens/verify"
    assert server.requests[0]["authorization"] == f"Bearer {TOKEN}"


async def test_a_silent_connection_is_pinged_and_kept_when_it_answers(certificates: Certificates) -> None:
    async with (
        H2Server(certificates) as server,
        _session(server, certificates, ping_after=0.2, ping_timeout=2.0) as session,
    ):
        client = session.client(TOKEN)
        await client.verify_token()
        async with asyncio.timeout(NEVER):
            await server.pinged.wait()
        await _until(lambda: _keepalive(session).pings_answered >= 1, NEVER)
        await client.verify_token()
        assert server.connections == 1
        assert _keepalive(session).connections_closed == 0


async def test_a_connection_that_does_not_answer_the_ping_is_closed(certificates: Certificates) -> None:
    async with (
        H2Server(certificates, mute_after=1) as server,
        _session(server, certificates, ping_after=0.2, ping_timeout=0.3) as session,
    ):
        client = session.client(TOKEN)
        await client.verify_token()
        async with asyncio.timeout(NEVER):
            await server.connection_closed.wait()
        assert _keepalive(session).connections_closed == 1
        # The next call gets a fresh connection (the server answers one request per connection before going mute).
        await client.verify_token()
        assert server.connections == 2


async def test_a_request_stuck_on_a_dead_connection_fails_at_the_ping_timeout(certificates: Certificates) -> None:
    async with (
        H2Server(certificates, mute_after=1) as server,
        _session(server, certificates, ping_after=0.2, ping_timeout=0.3, response_start=60, request=120) as session,
    ):
        client = session.client(TOKEN)
        await client.verify_token()
        with pytest.raises(Transient) as caught:
            async with asyncio.timeout(NEVER):
                await client.verify_token()
    assert isinstance(caught.value, NetworkError)  # the ping's, not the response-start bound's DeadlineExceeded
