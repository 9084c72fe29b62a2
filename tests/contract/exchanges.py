"""Recording what crosses the wire between kflare's Cloudflare client (or a test's direct call) and the emulator.

`Recorder` wraps the in-process ASGI transport: every request and its answer are kept whole, and the path each
request took is matched to a route template of the document or of the emulator.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from app.emulator.edge import API_PREFIX
from tests.contract.openapi import template_key


@dataclass(frozen=True)
class Exchange:
    via: str  # "client": one of kflare's client methods; "direct": the test's own request
    method: str
    path: str  # as requested, below the API prefix, without the query
    request_type: str
    request_body: bytes
    status: int
    response_type: str
    response_body: bytes
    query: tuple[tuple[str, str], ...] = ()
    """The request's query parameters, in the order sent."""

    def request_json(self) -> Any:
        return json.loads(self.request_body)

    def response_json(self) -> Any:
        return json.loads(self.response_body)


@dataclass
class Log:
    exchanges: list[Exchange] = field(default_factory=list)


class Recorder(httpx.AsyncBaseTransport):
    """A transport that hands requests to `inner` and logs each exchange, labelled `via`."""

    def __init__(self, inner: httpx.AsyncBaseTransport, log: Log, via: str) -> None:
        self._inner = inner
        self._log = log
        self._via = via

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        response = await self._inner.handle_async_request(request)
        content = await response.aread()
        path = request.url.path
        if path.startswith(API_PREFIX):
            self._log.exchanges.append(
                Exchange(
                    via=self._via,
                    method=request.method,
                    path=path.removeprefix(API_PREFIX),
                    request_type=request.headers.get("content-type", ""),
                    request_body=body,
                    status=response.status_code,
                    response_type=response.headers.get("content-type", ""),
                    response_body=content,
                    query=tuple(request.url.params.multi_items()),
                )
            )
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            content=content,
            request=request,
            extensions=response.extensions,
        )


def served_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path template) of the Cloudflare API the emulator serves, below the API prefix, read from the
    app's router (included routers are followed through their prefixes)."""
    found: set[tuple[str, str]] = set()

    def walk(routes: Iterable[BaseRoute], prefix: str) -> None:
        for route in routes:
            if isinstance(route, APIRoute):
                for method in route.methods:
                    found.add((method, prefix + route.path))
                continue
            included = getattr(route, "original_router", None)  # FastAPI's included router, routes unflattened
            if included is not None:
                walk(included.routes, prefix + route.include_context.prefix)  # type: ignore[attr-defined]

    walk(app.routes, "")
    return {(method, path.removeprefix(API_PREFIX)) for method, path in found if path.startswith(API_PREFIX + "/")}


class Templates:
    """Matches concrete paths to path templates, the most literal template first."""

    def __init__(self, templates: Iterable[str]) -> None:
        compiled = []
        for template in set(templates):
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            literals = sum(1 for part in template.split("/") if part and not part.startswith("{"))
            compiled.append((-literals, template, re.compile(pattern)))
        self._compiled = sorted(compiled)

    def match(self, path: str) -> str | None:
        for _, template, pattern in self._compiled:
            if pattern.match(path):
                return template_key(template)
        return None


def multipart_parts(content_type: str, body: bytes) -> dict[str, tuple[str, bytes]]:
    """The parts of a multipart/form-data body by name: (content type, payload)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    parts: dict[str, tuple[str, bytes]] = {}
    for part in message.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        parts[str(name)] = (part.get_content_type(), payload)
    return parts
