"""What a call to ``/client/v4`` meets before any route: the call log, injected faults and the global rate limit.

It is plain ASGI and sits outside FastAPI's own middleware, so that for a ``drop`` fault the ``send`` it receives is
still the server's and the connection can be closed under the request (see :func:`_drop`).
"""

from __future__ import annotations

import asyncio
import time

import httpx
from starlette.datastructures import Headers
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.emulator.auth import token_of
from app.emulator.calls import Call
from app.emulator.context import Emulator
from app.emulator.envelope import envelope, error, rate_limited
from app.emulator.faults import Fault

API_PREFIX = "/client/v4"

_STATUS_DEFAULTS = {
    429: (971, "Please wait and consider throttling your request speed"),
    500: (10001, "Internal server error"),
    502: (10002, "Bad gateway"),
    503: (10003, "Service unavailable"),
    504: (10004, "Gateway timeout"),
}
_REASONS = {502: "Bad Gateway", 503: "Service Temporarily Unavailable", 504: "Gateway Time-out"}


class ConnectionDropped(httpx.RemoteProtocolError):
    """A ``drop`` where no server connection can be reached: in process, behind httpx's ASGI transport.

    httpx hands an app's exception to the caller as is, so making it httpx's own "server disconnected" error lets an
    in-process client see the drop as it would over a socket. (A server such as uvicorn answers 500 instead.)
    """


class Edge:
    def __init__(self, app: ASGIApp, emulator: Emulator) -> None:
        self.app = app
        self.emulator = emulator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not (path == API_PREFIX or path.startswith(API_PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        emulator = self.emulator
        started = time.perf_counter()
        method: str = scope["method"]
        headers = Headers(scope=scope)
        token = token_of(headers, emulator.store)
        call = emulator.calls.add(
            Call(
                method=method,
                path=path,
                query=scope.get("query_string", b"").decode("latin-1"),
                token_id=token.id if token else None,
                time=time.time(),
                user_agent=headers.get("user-agent"),
            )
        )
        try:
            plan = emulator.faults.plan(method, path)
            if plan.latency_ms:
                await asyncio.sleep(plan.latency_ms / 1000)
            if plan.fault is not None:
                call.fault, call.fault_kind = plan.fault.id, plan.fault.spec.kind
                await self._fault(plan.fault, call, scope, receive, send)
                return
            decision = emulator.limiter.hit(token.bucket) if token is not None and token.usable() else None
            extra_headers = emulator.limiter.headers(decision)
            if decision is not None and not decision.allowed:
                call.status = 429
                refusal = rate_limited(decision.retry_after or 0).with_headers(extra_headers)
                await refusal.response()(scope, receive, send)
                return

            async def send_with_headers(message: Message) -> None:
                if message["type"] == "http.response.start":
                    call.status = message["status"]
                    headers = list(message.get("headers", []))
                    headers += [(k.lower().encode(), v.encode()) for k, v in extra_headers.items()]
                    message = {**message, "headers": headers}
                await send(message)

            await self.app(scope, receive, send_with_headers)
        finally:
            call.duration_ms = round((time.perf_counter() - started) * 1000, 3)

    async def _fault(self, fault: Fault, call: Call, scope: Scope, receive: Receive, send: Send) -> None:
        spec = fault.spec
        if spec.kind == "hang":
            await _wait_for_disconnect(receive)
            return
        if spec.kind == "drop":
            await _drop(send, receive)
            return
        status = spec.status or 500
        response: Response
        if spec.html:
            reason = _REASONS.get(status, "Error")
            page = (
                f"<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n"
                f"<center><h1>{status} {reason}</h1></center>\r\n<hr><center>cloudflare</center>\r\n"
                "</body>\r\n</html>\r\n"
            )
            response = HTMLResponse(page, status_code=status)
        else:
            code, message = _STATUS_DEFAULTS.get(status, (10000 + status, "Injected fault"))
            body = envelope(None, errors=[error(spec.code or code, spec.message or message)])
            response = JSONResponse(body, status_code=status)
        if spec.retry_after is not None:
            response.headers["Retry-After"] = str(spec.retry_after)
        call.status = status
        await response(scope, receive, send)


async def _wait_for_disconnect(receive: Receive) -> None:
    """Never answer: read until the client goes away. Awaiting ``receive`` keeps the event loop free."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _drop(send: Send, receive: Receive) -> None:
    """Close the connection without a response.

    ASGI has no message for that, so reach for the transport uvicorn's ``send`` is bound to (both its HTTP
    implementations keep it on the request cycle), close it, and wait until uvicorn has seen the connection go, so that
    it does not try to answer on it.
    """
    cycle: object = getattr(send, "__self__", None)
    close: object = getattr(getattr(cycle, "transport", None), "close", None)
    if not callable(close):  # duck-typed: uvloop's transports do not derive from asyncio's
        raise ConnectionDropped("Server disconnected without sending a response.")
    close()
    await _wait_for_disconnect(receive)
