"""The admin API under ``/__emulator`` (a prefix no Cloudflare route uses): plain JSON, no auth, not logged.

==========================================  =================================================================
``GET /__emulator/state``                   every object in the state format of :mod:`app.emulator.seed`
``POST /__emulator/state``                  seed (merge) objects in that format; answers what was created,
                                            generated IDs and token values included; 400 ``{"error"}`` if invalid
``POST /__emulator/reset``                  back to the starting state; answers the starting account and token
``POST /__emulator/faults``                 add a fault (:class:`~app.emulator.faults.FaultSpec`); ``{"id"}``
``GET /__emulator/faults``                  ``{"faults": [...]}`` with ``fired`` and ``remaining`` counts
``DELETE /__emulator/faults[/{id}]``        remove all faults, or one
``GET /__emulator/calls``                   ``{"calls": [...]}``; filters ``method``, ``path`` (regex),
                                            ``since`` (Unix seconds), ``token_id``
``DELETE /__emulator/calls``                forget the calls so far
``GET /__emulator/rate-limit``              the limits and the use of each budget
``PUT /__emulator/rate-limit``              ``{"calls", "seconds", "lockout", "reset"?}``; ``reset`` (default
                                            true) also empties every budget and ends lockouts
``GET /__emulator/options``                 the simulation's knobs (declared by the object types) and their values
``PUT /__emulator/options``                 ``{name: whole number, ...}``: change some; unknown names are refused
``POST /__emulator/zones/{id}/activate``    make a pending zone active, as if its name servers were set
==========================================  =================================================================
"""

from __future__ import annotations

import math
import re
from typing import TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from app.emulator.context import EmulatorDep
from app.emulator.envelope import CloudflareError, pointer_of, read_json
from app.emulator.faults import FaultSpec
from app.emulator.ids import now_iso
from app.emulator.ratelimit import Limits
from app.emulator.seed import SeedError, apply_seed, dump_state

ADMIN_PREFIX = "/__emulator"

router = APIRouter(prefix=ADMIN_PREFIX, tags=["admin"])

M = TypeVar("M", bound=BaseModel)


class RateLimitUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    calls: int = Field(gt=0)
    seconds: float = Field(gt=0)
    lockout: float = Field(ge=0)
    reset: bool = True


class AdminError(Exception):
    """A refused admin call; the app answers ``{"error": message}`` with ``status``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.message}, status_code=self.status)


def _parse(model: type[M], data: object) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise AdminError(pointer_of(exc)[0]) from None


async def _json(request: Request) -> JsonValue:
    try:
        return await read_json(request)
    except CloudflareError:
        raise AdminError("the body is not JSON") from None


@router.get("/state")
async def get_state(emulator: EmulatorDep) -> JSONResponse:
    return JSONResponse(dump_state(emulator.store))


@router.get("/counts")
async def get_counts(emulator: EmulatorDep) -> JSONResponse:
    return JSONResponse(emulator.store.counts())


@router.post("/state")
async def seed_state(request: Request, emulator: EmulatorDep) -> JSONResponse:
    raw = await _json(request)
    if not isinstance(raw, dict):
        raise AdminError("the state is a JSON object")
    try:
        return JSONResponse(apply_seed(emulator.store, raw))
    except SeedError as exc:
        raise AdminError(str(exc)) from None


@router.post("/reset")
async def reset(emulator: EmulatorDep) -> JSONResponse:
    emulator.reset()
    return JSONResponse(emulator.bootstrap)


@router.post("/faults")
async def add_fault(request: Request, emulator: EmulatorDep) -> JSONResponse:
    spec = _parse(FaultSpec, await _json(request))
    return JSONResponse({"id": emulator.faults.add(spec).id})


@router.get("/faults")
async def list_faults(emulator: EmulatorDep) -> JSONResponse:
    return JSONResponse({"faults": [fault.describe() for fault in emulator.faults.list()]})


@router.delete("/faults")
async def clear_faults(emulator: EmulatorDep) -> JSONResponse:
    emulator.faults.clear()
    return JSONResponse({"deleted": "all"})


@router.delete("/faults/{fault_id}")
async def delete_fault(fault_id: str, emulator: EmulatorDep) -> JSONResponse:
    if not emulator.faults.remove(fault_id):
        raise AdminError(f"no fault {fault_id}", 404)
    return JSONResponse({"deleted": fault_id})


@router.get("/calls")
async def list_calls(request: Request, emulator: EmulatorDep) -> JSONResponse:
    query = request.query_params
    path = query.get("path") or None
    if path is not None:
        try:
            re.compile(path)
        except re.error as exc:
            raise AdminError(f"path is not a regular expression: {exc}") from None
    since: float | None = None
    if query.get("since"):
        try:
            since = float(query["since"])
        except ValueError:
            raise AdminError("since is Unix seconds") from None
        if not math.isfinite(since):
            raise AdminError("since is Unix seconds")
    calls = emulator.calls.select(
        method=query.get("method") or None, path=path, since=since, token_id=query.get("token_id") or None
    )
    return JSONResponse({"calls": [call.describe() for call in calls]})


@router.delete("/calls")
async def clear_calls(emulator: EmulatorDep) -> JSONResponse:
    emulator.calls.clear()
    return JSONResponse({"deleted": "all"})


@router.get("/rate-limit")
async def get_rate_limit(emulator: EmulatorDep) -> JSONResponse:
    return JSONResponse(emulator.limiter.describe())


@router.put("/rate-limit")
async def set_rate_limit(request: Request, emulator: EmulatorDep) -> JSONResponse:
    update = _parse(RateLimitUpdate, await _json(request))
    emulator.limiter.configure(Limits(update.calls, update.seconds, update.lockout), reset=update.reset)
    return JSONResponse(emulator.limiter.describe())


@router.get("/options")
async def get_options(emulator: EmulatorDep) -> JSONResponse:
    return JSONResponse(emulator.options)


@router.put("/options")
async def set_options(request: Request, emulator: EmulatorDep) -> JSONResponse:
    raw = await _json(request)
    if not isinstance(raw, dict):
        raise AdminError("the options are a JSON object")
    unknown = sorted(set(raw) - set(emulator.defaults))
    if unknown:
        raise AdminError(f"unknown options {', '.join(unknown)}; known: {', '.join(sorted(emulator.defaults))}")
    options: dict[str, int] = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise AdminError(f"{name} is a whole number")
        options[name] = value
    emulator.options.update(options)
    return JSONResponse(emulator.options)


@router.post("/zones/{zone_id}/activate")
async def activate_zone(zone_id: str, emulator: EmulatorDep) -> JSONResponse:
    zone = emulator.store.zones.get(zone_id)
    if zone is None:
        raise AdminError(f"no zone {zone_id}", 404)
    if zone["status"] != "active":
        zone["status"] = "active"
        zone["activated_on"] = zone["modified_on"] = now_iso()
    return JSONResponse({"id": zone_id, "status": zone["status"]})
