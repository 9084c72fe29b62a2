"""Small real servers for the timeout and HTTP/2 tests: each misbehaves in one precise way."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import logging
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "TcpServer"], Awaitable[None]]


class TcpServer:
    """An asyncio TCP server on 127.0.0.1 with a test-chosen handler; handlers are cancelled on exit."""

    def __init__(self, handler: Handler, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._handler = handler
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        self.port = 0
        self.connected = asyncio.Event()

    async def __aenter__(self) -> TcpServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.connected.set()
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handler(reader, writer, self)
        except (asyncio.CancelledError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self._server.wait_closed()

    def url(self, scheme: str = "http") -> str:
        host = "localhost" if scheme == "https" else "127.0.0.1"
        return f"{scheme}://{host}:{self.port}/client/v4"


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


async def hang_after_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: TcpServer) -> None:
    """Read the request, never answer."""
    await _read_head(reader)
    await asyncio.Event().wait()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: TcpServer) -> None:
    """Accept the connection and say nothing, not even a TLS handshake."""
    await asyncio.Event().wait()


async def dribble_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: TcpServer) -> None:
    """Answer the headers at once, then one byte of body every 20 ms, never finishing."""
    await _read_head(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
    await writer.drain()
    while True:
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.02)


async def never_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: TcpServer) -> None:
    """Read the request head, then never read the body: a large upload stalls."""
    await _read_head(reader)
    await asyncio.Event().wait()


def answer(body: bytes, status: str = "200 OK", content_type: str = "application/json") -> Handler:
    """Answer every request on the connection with `body`."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: TcpServer) -> None:
        while True:
            head = await _read_head(reader)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()

    return handler


class Certificates:
    """A self-signed certificate for localhost / 127.0.0.1 and the contexts that use it."""

    def __init__(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        self._dir = tempfile.TemporaryDirectory()
        self.cert_path = Path(self._dir.name) / "cert.pem"
        self.key_path = Path(self._dir.name) / "key.pem"
        self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    def server_context(self, alpn: list[str]) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_path, self.key_path)
        context.set_alpn_protocols(alpn)
        return context

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.cert_path))
        return context

    def cleanup(self) -> None:
        self._dir.cleanup()


class H2Server:
    """An HTTP/2 (TLS, ALPN h2) server answering every request with a Cloudflare envelope. With `mute_after`, a
    connection goes silent (reads but never answers anything, pings included) after that many responses."""

    def __init__(self, certificates: Certificates, *, mute_after: int | None = None) -> None:
        self.mute_after = mute_after
        self.requests: list[dict[str, str]] = []
        self.pings = 0
        self.pinged = asyncio.Event()
        self.closed_connections = 0
        self.connection_closed = asyncio.Event()
        self._server = TcpServer(self._handle, ssl_context=certificates.server_context(["h2"]))

    @property
    def connections(self) -> int:
        return self._server.connections

    def url(self) -> str:
        return self._server.url("https")

    async def __aenter__(self) -> H2Server:
        await self._server.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._server.__aexit__(*exc_info)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: TcpServer) -> None:
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        connection.initiate_connection()
        writer.write(connection.data_to_send())
        responses = 0
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                if self.mute_after is not None and responses >= self.mute_after:
                    continue
                for event in _quietly(connection.receive_data, data):
                    if isinstance(event, h2.events.RequestReceived):
                        self.requests.append({_text(k): _text(v) for k, v in event.headers or []})
                        body = json.dumps(
                            {"success": True, "errors": [], "messages": [], "result": {"id": "z", "status": "active"}}
                        ).encode()
                        assert event.stream_id is not None
                        connection.send_headers(
                            event.stream_id,
                            [
                                (":status", "200"),
                                ("content-type", "application/json"),
                                ("content-length", str(len(body))),
                            ],
                        )
                        connection.send_data(event.stream_id, body, end_stream=True)
                        responses += 1
                    elif isinstance(event, h2.events.PingReceived):
                        self.pings += 1
                        self.pinged.set()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        return
                writer.write(connection.data_to_send())
                await writer.drain()
        finally:
            self.closed_connections += 1
            self.connection_closed.set()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _quietly(function: Callable[[bytes], list[h2.events.Event]], data: bytes) -> list[h2.events.Event]:
    """Run the server's (synchronous) header decoding with hpack's logger off, so that the tests' log captures
    hold only what the client logs: the server necessarily decodes the token."""
    hpack_logger = logging.getLogger("hpack.hpack")
    hpack_logger.disabled = True
    try:
        return function(data)
    finally:
        hpack_logger.disabled = False


def envelope(result: Any) -> bytes:
    return json.dumps({"success": True, "errors": [], "messages": [], "result": result}).encode()
