"""The webhook listener's routes: `POST /validate/{plural}` for every kind in `app.api.KINDS`.

The API server sends an AdmissionReview and expects one back with the same `uid`. Anything else that reaches the
port gets a plain HTTP error that says what is wrong: 404 for a plural that is no kflare kind, 413 for a body over
`max_body` bytes (read in chunks, never buffered past the limit), 408 for a body that does not arrive within
`body_timeout` seconds (give or take a quarter of it, at most a second), 400 for a body that is not an
AdmissionReview, 503 when `max_in_flight` reviews are being read and decided and this one's turn does not come
within `wait_timeout` (by default `body_timeout`).

Memory: a review costs its body plus the objects parsed from it, a few times the body's size for as long as it is
read and decided. Bounding how many are in flight bounds the process' peak, which is what its RSS keeps after a
burst; a request waiting for its turn holds only what uvicorn buffers before it stops reading the connection.
A client that goes away mid-body (or whose chunked encoding is broken, which uvicorn answers with 400 and a closed
connection) ends its request quietly: there is nobody left to answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypedDict

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from pydantic_core import to_json
from starlette.types import Receive, Scope, Send
from typing_extensions import Unpack

from app.api import KINDS, FieldError, ResourceClass
from app.api.schema import structural_schema
from webhooks.access import Cluster, review_access
from webhooks.advice import warnings_for
from webhooks.review import AdmissionRequest, AdmissionReview, ReviewError, parse_review, review_response
from webhooks.validate import INTERNAL, Decision, decide, deny

log = logging.getLogger(__name__)

MAX_BODY: Final = 3 * 1024 * 1024
"""Bytes of one AdmissionReview: the API server's own limit on an object is 3 MiB (etcd's 1.5 MiB, times two for
`object` and `oldObject`, is below it)."""
BODY_TIMEOUT: Final = 10.0
"""Seconds to receive a whole body; the API server's own deadline for a call is at most 30 s."""
MAX_IN_FLIGHT: Final = 8
"""Reviews decided at once; the API server sends a handful at a time. Bodies being read take no turn (a client that
stalls mid-body would hold it): their bytes count against `MAX_IN_FLIGHT * MAX_BODY` as they arrive instead."""
ROUTE: Final = "/validate/{plural}"
_PREFIX: Final = ROUTE.removesuffix("{plural}")


class _Gone(Exception):
    """The client went away before its body was read."""


RequestObserver = Callable[[str, str, str, float], None]
"""Told of each review answered: its method, status code, route template and seconds to answer."""
Answer = Callable[[ResourceClass, Request], Awaitable[Response]]


class AppOptions(TypedDict, total=False):
    """What `WebhookApp` passes on to FastAPI."""

    title: str
    version: str
    docs_url: str | None
    redoc_url: str | None
    openapi_url: str | None


class WebhookApp(FastAPI):
    """The webhook's FastAPI app, which answers a review (`POST /validate/<a kind's plural>`) before FastAPI's own
    layers. Those layers (the error page, OpenTelemetry's hooks, a body limit, an exit stack for dependencies, the
    routing, and the same again around the endpoint) cost as much CPU per request as a review's parsing and decision
    together, and do nothing for a review: the route reads its body itself, bounded in size and time, and answers
    every error it meets. Anything else (a plural that is no kind, another method or path) goes through FastAPI as
    usual; the route is declared there too, so the OpenAPI document describes it. What instruments the app's
    requests (`app.metrics.collectors.instrument`) is told of each review by `observe_direct`."""

    def __init__(self, answer: Answer, by_plural: Mapping[str, ResourceClass], **kwargs: Unpack[AppOptions]) -> None:
        super().__init__(**kwargs)
        self._answer = answer
        self._by_plural = by_plural
        self._observers: list[RequestObserver] = []

    def observe_direct(self, observer: RequestObserver) -> None:
        self._observers.append(observer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].startswith(_PREFIX):
            model = self._by_plural.get(scope["path"][len(_PREFIX) :])
            if model is not None:
                await self._review(model, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _review(self, model: ResourceClass, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500  # what the server answers for an exception that escapes (after logging it)
        try:
            request = Request(scope, receive)
            try:
                response = await self._answer(model, request)
            except HTTPException as exc:  # answered as FastAPI's own handler would
                response = await http_exception_handler(request, exc)
            except _Gone:
                log.debug("a client went away before sending its whole body")
                response = Response(status_code=400)  # never sent: uvicorn drops what is sent to a closed connection
            status = response.status_code
            await response(scope, receive, send)
        finally:
            if self._observers:
                seconds = time.perf_counter() - started
                for observe in self._observers:
                    observe("POST", str(status), ROUTE, seconds)


class BodyDeadlines:
    """When each body being read is due, enforced by one timer for all of them: arming and disarming a timer per
    read (`asyncio.timeout`) cost a quarter of what a review costs beyond FastAPI's own work. A read still going at
    its deadline is cancelled within `period` seconds after it, and `late` says so to the read."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.period = min(1.0, timeout / 4)
        self._due: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, task: asyncio.Task[object]) -> None:
        loop = task.get_loop()
        self._due[task] = loop.time() + self.timeout
        if self._timer is None or self._loop is not loop:
            self._loop, self._timer = loop, loop.call_later(self.period, self._sweep)

    def late(self, task: asyncio.Task[object]) -> bool:
        """Whether `task` was cancelled for missing its deadline; the cancellation is then withdrawn, as
        `asyncio.timeout` does, so the task carries on to answer 408."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        task.uncancel()
        return True

    def forget(self, task: asyncio.Task[object]) -> None:
        self._due.pop(task, None)
        self._expired.discard(task)

    def _sweep(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        for task, due in self._due.items():
            if due <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        self._timer = self._loop.call_later(self.period, self._sweep) if self._due else None


class BodyBudget:
    """The bytes of bodies being read and not yet decided, bounded: counted as they arrive, so a client that stalls
    holds only what it sent (the API server's reviews go on being read and answered), while clients that all send
    large bodies slowly cannot hold more memory than the bound; a body that would pass it is refused with 503."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self.limit:
            raise HTTPException(503, "too many reviews at once; try again", headers={"Retry-After": "1"})
        self.held += size

    def give(self, size: int) -> None:
        self.held -= size


async def read_body(request: Request, limit: int, deadlines: BodyDeadlines, budget: BodyBudget) -> bytes:
    """The request body, at most `limit` bytes (413 past that), by its deadline (408 past that), its bytes taken
    from `budget` as they arrive (503 past it); the caller gives back `len(body)` once it is done with it."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPException(400, f"invalid Content-Length {declared[:40]!r}")
        if int(declared) > limit:
            raise HTTPException(413, f"the body is {declared} bytes; at most {limit} are accepted")
    # The ASGI messages themselves rather than `request.stream()`: a body usually comes in one message, and the
    # generator around it cost more than reading it.
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    task = asyncio.current_task()
    assert task is not None
    deadlines.watch(task)
    done = False
    try:
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _Gone  # http.disconnect
            chunk: bytes = message.get("body", b"")
            if size + len(chunk) > limit:
                raise HTTPException(413, f"the body is over {limit} bytes; at most {limit} are accepted")
            budget.take(len(chunk))
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        done = True
    except asyncio.CancelledError:
        if deadlines.late(task):
            raise HTTPException(408, f"the body did not arrive within {deadlines.timeout:g}s") from None
        raise
    finally:
        deadlines.forget(task)
        if not done:
            budget.give(size)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _decide_safely(model: ResourceClass, request: AdmissionRequest, kflare: frozenset[str]) -> Decision:
    try:
        return decide(model, request, kflare)
    except Exception as exc:  # a bug must not turn into a 500: refuse, say why, keep the details in the log
        log.exception("validating %s %s/%s failed", model.info.kind, request.namespace, request.name)
        return deny([FieldError("", f"internal error while validating: {type(exc).__name__}")], code=INTERNAL)


def create_app(
    *,
    max_body: int = MAX_BODY,
    body_timeout: float = BODY_TIMEOUT,
    max_in_flight: int = MAX_IN_FLIGHT,
    wait_timeout: float | None = None,
    cluster: Cluster | None = None,
    kflare: Callable[[], frozenset[str]] = frozenset,
) -> WebhookApp:
    """The webhook app; one route serves every kind, by its plural. `cluster` reads the cluster's objects for the
    tenancy checks and the warnings of an allowed object (neither without it); `kflare` tells the usernames of
    kflare's controller (learned once it has connected), whose requests alone may write what only kflare writes."""
    turn_timeout = body_timeout if wait_timeout is None else wait_timeout
    by_plural: dict[str, ResourceClass] = {model.info.plural: model for model in KINDS}
    plurals = ", ".join(sorted(by_plural))
    turns = asyncio.Semaphore(max_in_flight)
    deadlines = BodyDeadlines(body_timeout)
    budget = BodyBudget(max_in_flight * max_body)

    async def answer(model: ResourceClass, request: Request) -> Response:
        body = await read_body(request, max_body, deadlines, budget)
        try:
            if turns.locked():  # only a wait needs a deadline (arming one costs as much as parsing the review)
                try:
                    async with asyncio.timeout(turn_timeout):
                        await turns.acquire()
                except TimeoutError:
                    raise HTTPException(
                        503, "too many reviews at once; try again", headers={"Retry-After": "1"}
                    ) from None
            else:
                await turns.acquire()
            try:
                try:
                    review = parse_review(body)
                except ReviewError as exc:
                    raise HTTPException(exc.status_code, str(exc)) from None
                admission = review.request
                users = kflare()
                decision = _decide_safely(model, admission, users)
            finally:
                turns.release()
        finally:
            budget.give(len(body))
            del body
        warnings: tuple[str, ...] = ()
        readable = True
        writes = admission.operation.upper() in ("CREATE", "UPDATE") and not admission.sub_resource
        if decision.allowed and writes and admission.username not in users:
            # kflare's own writes (finalizers, status, its records) are never refused for what it enforces itself.
            access = await review_access(model, admission, cluster)
            if access.errors:
                decision = deny(access.errors)
            warnings = access.warnings
            readable = access.read  # one wait for a cluster that does not answer, not one per kind of read
        if decision.allowed:
            log.debug("allowed %s %s %s/%s", admission.operation, model.info.kind, admission.namespace, admission.name)
        else:
            log.info(
                "denied %s %s %s/%s: %s",
                admission.operation,
                model.info.kind,
                admission.namespace,
                admission.name,
                decision.message,
            )
        if decision.allowed and writes:
            objects = None if cluster is None or not readable else cluster.list
            warnings += await warnings_for(model, admission.object, admission.namespace, objects)
        reply = review_response(admission.uid, decision.allowed, decision.status, warnings)
        # pydantic's serialiser: compact UTF-8 in one call, a quarter of what the json module's encoder costs. The
        # strings in it never hold a lone surrogate (the JSON parser refuses one), so encoding cannot fail.
        return Response(to_json(reply), media_type="application/json")

    app = WebhookApp(
        answer,
        by_plural,
        title="kflare admission webhooks",
        version="v1",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    # The route reads the body itself (bounded in size and time), so FastAPI cannot derive its schema: declare it,
    # so that the OpenAPI document (and the fuzzing driven by it) knows what an AdmissionReview looks like.
    body_schema = {"type": "object", **structural_schema(AdmissionReview)}
    review_body = {"requestBody": {"required": True, "content": {"application/json": {"schema": body_schema}}}}

    # A review of a kind is answered before FastAPI's routing (`WebhookApp`): what reaches this route names no kind.
    async def validate(plural: str) -> Response:
        raise HTTPException(
            404, f"{plural[:64]!r} is no kflare kind; the webhook serves /validate/<plural> for {plurals}"
        )

    app.router.add_api_route(ROUTE, validate, methods=["POST"], openapi_extra=review_body)
    return app
