"""The application factory."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import JsonValue
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp

from app.emulator import admin, verify
from app.emulator.context import Emulator
from app.emulator.edge import API_PREFIX, Edge
from app.emulator.envelope import CloudflareError, invalid_body, no_route
from app.emulator.kinds import KINDS
from app.emulator.ratelimit import Limits


class EmulatorApp(FastAPI):
    """A FastAPI app that carries its :class:`Emulator` and puts the :class:`Edge` in front of everything."""

    def __init__(
        self, emulator: Emulator, *, title: str, docs_url: str | None, redoc_url: str | None, openapi_url: str | None
    ) -> None:
        super().__init__(title=title, docs_url=docs_url, redoc_url=redoc_url, openapi_url=openapi_url)
        self.emulator = emulator

    def build_middleware_stack(self) -> ASGIApp:
        # Outside Starlette's error middleware, which would hand the edge a wrapped `send` (see edge._drop).
        return Edge(super().build_middleware_stack(), self.emulator)


def create_app(
    state: Mapping[str, JsonValue] | None = None,
    rate_limit: tuple[int, float] = (1200, 300.0),
    lockout: float = 300.0,
) -> FastAPI:
    """An emulator seeded with ``state`` (the format of :mod:`app.emulator.seed`; ``None``: one account and one
    all-powerful token). Raises :class:`~app.emulator.seed.SeedError` for a state it cannot apply."""
    emulator = Emulator(Limits(calls=rate_limit[0], seconds=rate_limit[1], lockout=lockout), KINDS)
    emulator.boot(state)
    app = EmulatorApp(
        emulator,
        title="kflare Cloudflare API emulator",
        docs_url=f"{admin.ADMIN_PREFIX}/docs",
        redoc_url=None,
        openapi_url=f"{admin.ADMIN_PREFIX}/openapi.json",
    )
    app.include_router(verify.router, prefix=API_PREFIX)
    for kind in KINDS:
        app.include_router(kind.router(), prefix=API_PREFIX)
    app.include_router(admin.router)
    simulations = APIRouter(prefix=admin.ADMIN_PREFIX, tags=["admin"])
    for kind in KINDS:
        kind.admin_routes(simulations)
    app.include_router(simulations)
    _install_handlers(app)
    return app


def _install_handlers(app: FastAPI) -> None:
    async def cloudflare_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CloudflareError)
        return exc.response()

    async def admin_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, admin.AdminError)
        return exc.response()

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        if request.url.path.startswith(API_PREFIX) and exc.status_code in (404, 405):
            return no_route(request.url.path).response()
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        message = "; ".join(str(e.get("msg", "invalid")) for e in exc.errors())
        if request.url.path.startswith(API_PREFIX):
            return invalid_body(message).response()
        return JSONResponse({"error": message}, status_code=400)

    async def unexpected(_request: Request, _exc: Exception) -> JSONResponse:
        return CloudflareError.single(500, 10001, "Internal server error").response()

    app.add_exception_handler(CloudflareError, cloudflare_error)
    app.add_exception_handler(admin.AdminError, admin_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, unexpected)
