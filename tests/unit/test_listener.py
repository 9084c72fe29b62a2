"""The listeners against hostile clients, over real sockets: the webhook listener exactly as `kflare run` builds it
(`app.server.webhook_listener`: TLS, the bounded protocol, the instrumented app), with short timeouts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.controlplane import free_port
from app.server import Runtime, Served, listeners, webhook_listener
from app.settings import Settings
from tests.helpers import eventually, serving
from tests.unit.webhooks.reviews import review, sample

pytestmark = pytest.mark.heavy

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@contextlib.asynccontextmanager
async def webhook(**settings: Any) -> AsyncIterator[tuple[Served, ssl.SSLContext]]:
    async with serving(webhook_listener(Settings(**settings), "127.0.0.1", free_port())) as served:
        assert served.tls is not None
        yield served, ssl.create_default_context(cadata=served.tls.cert_pem.decode())


async def connect(served: Served, context: ssl.SSLContext | None) -> Stream:
    return await asyncio.wait_for(
        asyncio.open_connection(
            "127.0.0.1", served.port, ssl=context, server_hostname="127.0.0.1" if context else None
        ),
        10,
    )


async def answer(stream: Stream, timeout: float = 20) -> bytes:
    """Everything the server sends until it closes the connection."""
    reader, writer = stream
    try:
        return await asyncio.wait_for(reader.read(), timeout)
    except (ConnectionError, ssl.SSLError):
        return b""
    finally:
        writer.close()


async def valid_review_works(served: Served, context: ssl.SSLContext) -> None:
    sent = review("CREATE", sample("DNSRecord", type="TXT", content="x", proxied=True))
    async with httpx.AsyncClient(verify=context, timeout=10) as http:
        reply = await http.post(f"{served.url}/validate/dnsrecords", content=json.dumps(sent))
    assert reply.status_code == 200
    assert reply.json()["response"]["allowed"] is False


async def test_300_connections_that_never_finish_their_headers_are_closed() -> None:
    async with webhook(http_header_timeout="0.3s", http_max_connections=400) as (served, context):
        streams: list[Stream] = []
        for _ in range(300):
            stream = await connect(served, context)
            stream[1].write(b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nContent-Type: appl")
            streams.append(stream)
        answers = await asyncio.gather(*(answer(s) for s in streams))  # each read ends when the server closes
        assert all(a.startswith(b"HTTP/1.1 408 Request Timeout\r\n") for a in answers), answers[:3]
        assert answers[0].endswith(b"no complete request headers within 0.3s")

        async def none_open() -> bool:
            return not served.server.server_state.connections

        await eventually(none_open, timeout=10, what="every connection to be closed")
        await valid_review_works(served, context)


async def test_a_connection_that_never_starts_tls_is_closed() -> None:
    async with webhook(http_header_timeout="0.3s") as (served, context):
        plain = await connect(served, None)
        assert await answer(plain) == b""  # closed, nothing said: it spoke no TLS
        silent = await connect(served, None)
        silent[1].write(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
        assert await answer(silent) == b""
        await valid_review_works(served, context)


async def test_a_kept_alive_connection_cannot_dribble_its_next_request() -> None:
    async with webhook(http_header_timeout="0.3s") as (served, context):
        reader, writer = await connect(served, context)
        body = json.dumps(review("CREATE", sample("DNSRecord"))).encode()
        writer.write(
            b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        status = await asyncio.wait_for(reader.readline(), 10)
        assert status.startswith(b"HTTP/1.1 200")
        writer.write(b"POST /validate/dnsrecords HTTP/1.1\r\nHo")  # the next request starts, and stalls
        rest = await answer((reader, writer))
        assert b"HTTP/1.1 408 Request Timeout" in rest


async def test_connections_over_the_cap_are_closed_at_once() -> None:
    async with webhook(http_header_timeout="60s", http_max_connections=20) as (served, context):
        held = [await connect(served, context) for _ in range(20)]
        for stream in held:
            stream[1].write(b"POST /validate/dnsrecords HTTP/1.1\r\n")

        async def refused() -> bool:
            try:
                extra = await connect(served, context)
            except (ConnectionError, ssl.SSLError):
                return True  # closed during the handshake
            return await answer(extra, timeout=5) == b""

        assert await refused()
        for stream in held[:5]:
            stream[1].close()

        async def room() -> bool:
            return len(served.server.server_state.connections) <= 15

        await eventually(room, timeout=10, what="the closed connections to be gone")
        await valid_review_works(served, context)
        for stream in held[5:]:
            stream[1].close()


async def test_oversized_request_headers_get_431() -> None:
    async with webhook() as (served, context):
        stream = await connect(served, context)
        stream[1].write(b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nX-Pad: " + b"a" * 200_000 + b"\r\n\r\n")
        reply = await answer(stream)
        assert reply.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        assert reply.endswith(b"request headers over 65536 bytes")


async def test_a_body_that_stalls_gets_408_after_the_webhook_body_timeout() -> None:
    async with webhook(webhook_body_timeout="0.4s") as (served, context):
        stream = await connect(served, context)
        stream[1].write(
            b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"apiVersion": '
        )
        # Well before the default 10 s: the flag, not the default, set the deadline.
        status = await asyncio.wait_for(stream[0].readline(), 5)
        stream[1].close()
        assert status == b"HTTP/1.1 408 Request Timeout\r\n", status
        await valid_review_works(served, context)


async def test_a_malformed_chunked_body_is_400_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async with webhook() as (served, context):
        with caplog.at_level(logging.INFO):
            for _ in range(3):
                stream = await connect(served, context)
                stream[1].write(
                    b"POST /validate/dnsrecords HTTP/1.1\r\nHost: kflare\r\nContent-Type: application/json\r\n"
                    b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\nnot-hex\r\n'
                )
                assert (await answer(stream)).startswith(b"HTTP/1.1 400 Bad Request\r\n")
        records = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert not [r for r in records if r.exc_info or "Traceback" in r.getMessage()]
        assert len(records) <= 3  # one short line a request at most
        assert all(len(r.getMessage()) < 100 for r in records)
        await valid_review_works(served, context)


async def test_the_webhook_listens_on_the_bind_address_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("KFLARE_WEBHOOK_BIND_ADDRESS", f"127.0.0.1:{port}")
    settings = Settings(health_probe_bind_address="0", metrics_bind_address="0")
    (served,) = listeners(settings, Runtime(settings))
    assert served.name == "webhook"
    async with serving(served):
        bound = {s.getsockname()[:2] for server in served.server.servers for s in server.sockets}
        assert bound == {("127.0.0.1", port)}
