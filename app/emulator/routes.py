"""Routes beside a collection's generic endpoints: a special endpoint reads its path parameters from the request,
and is documented as the generic ones are (its path parameters in the OpenAPI document)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request, Response
from fastapi.datastructures import Default, DefaultPlaceholder
from fastapi.responses import JSONResponse

from app.emulator.envelope import JSON


def path_parameters(path: str) -> JSON:
    """OpenAPI path parameters of a templated path, which the generic endpoints read from the request."""
    names = [part[1:-1].split(":")[0] for part in path.split("/") if part.startswith("{") and part.endswith("}")]
    return {"parameters": [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]}


# FastAPI's own default, so that a route's answer class still follows its router's.
_DEFAULT_RESPONSE = Default(JSONResponse)


def route(
    router: APIRouter,
    method: str,
    path: str,
    name: str,
    endpoint: Callable[[Request], Awaitable[Response]],
    *,
    status_code: int | None = None,
    response_class: type[Response] | DefaultPlaceholder = _DEFAULT_RESPONSE,
) -> None:
    """Add a special endpoint that reads its path parameters from the request, documented like the generic ones."""
    router.add_api_route(
        path,
        endpoint,
        methods=[method],
        name=name,
        openapi_extra=path_parameters(path),
        status_code=status_code,
        response_class=response_class,
    )
