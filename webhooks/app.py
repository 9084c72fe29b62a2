"""The webhook listener's routes: `POST /validate/{plural}` for every kind in `app.api.KINDS`.

The API server sends an AdmissionReview and expects one back with the same `uid`. Anything else that reaches the
port gets a plain HTTP error that says what is wrong: 404 for a plural that is no kflare kind, 413 for a body over
`max_body` bytes (read in chunks, never buffered past the limit), 408 for a body that does not arrive within
`body_timeout` seconds, 400 for a body that is not an AdmissionReview.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from app.api import KINDS, FieldError, ResourceClass
from app.api.schema import structural_schema
from webhooks.advice import ListObjects, warnings_for
from webhooks.review import AdmissionRequest, AdmissionReview, ReviewError, parse_review, review_response
from webhooks.validate import INTERNAL, Decision, decide, deny

log = logging.getLogger(__name__)

MAX_BODY: Final = 3 * 1024 * 1024
"""Bytes of one AdmissionReview: the API server's own limit on an object is 3 MiB (etcd's 1.5 MiB, times two for
`object` and `oldObject`, is below it)."""
BODY_TIMEOUT: Final = 10.0
"""Seconds to receive a whole body; the API server's own deadline for a call is at most 30 s."""


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request body, at most `limit` bytes (413 past that), within `timeout` seconds (408 past that)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise HTTPException(400, f"invalid Content-Length {declared[:40]!r}")
        if int(declared) > limit:
            raise HTTPException(413, f"the body is {declared} bytes; at most {limit} are accepted")
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise HTTPException(413, f"the body is over {limit} bytes; at most {limit} are accepted")
    except TimeoutError:
        raise HTTPException(408, f"the body did not arrive within {timeout:g}s") from None
    return bytes(body)


def _decide_safely(model: ResourceClass, request: AdmissionRequest) -> Decision:
    try:
        return decide(model, request)
    except Exception as exc:  # a bug must not turn into a 500: refuse, say why, keep the details in the log
        log.exception("validating %s %s/%s failed", model.info.kind, request.namespace, request.name)
        return deny([FieldError("", f"internal error while validating: {type(exc).__name__}")], code=INTERNAL)


def create_app(
    *, max_body: int = MAX_BODY, body_timeout: float = BODY_TIMEOUT, objects: ListObjects | None = None
) -> FastAPI:
    """The webhook app; one route serves every kind, by its plural. `objects` reads the cluster's kflare objects
    for the warnings of an allowed object (none without it)."""
    by_plural: dict[str, ResourceClass] = {model.info.plural: model for model in KINDS}
    plurals = ", ".join(sorted(by_plural))
    app = FastAPI(title="kflare admission webhooks", version="v1", docs_url=None, redoc_url=None, openapi_url=None)

    # The route reads the body itself (bounded in size and time), so FastAPI cannot derive its schema: declare it,
    # so that the OpenAPI document (and the fuzzing driven by it) knows what an AdmissionReview looks like.
    body_schema = {"type": "object", **structural_schema(AdmissionReview)}
    review_body = {"requestBody": {"required": True, "content": {"application/json": {"schema": body_schema}}}}

    @app.post("/validate/{plural}", openapi_extra=review_body)
    async def validate(plural: str, request: Request) -> JSONResponse:
        model = by_plural.get(plural)
        if model is None:
            raise HTTPException(
                404, f"{plural[:64]!r} is no kflare kind; the webhook serves /validate/<plural> for {plurals}"
            )
        body = await read_body(request, max_body, body_timeout)
        try:
            review = parse_review(body)
        except ReviewError as exc:
            raise HTTPException(exc.status_code, str(exc)) from None
        admission = review.request
        decision = _decide_safely(model, admission)
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
        warnings: tuple[str, ...] = ()
        if decision.allowed and admission.operation.upper() in ("CREATE", "UPDATE") and not admission.sub_resource:
            warnings = await warnings_for(model, admission.object, admission.namespace, objects)
        return JSONResponse(review_response(admission.uid, decision.allowed, decision.status, warnings))

    return app
