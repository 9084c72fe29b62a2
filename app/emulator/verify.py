"""Token verification: ``GET /user/tokens/verify`` (user-owned) and ``GET /accounts/{id}/tokens/verify``.

A valid token gets ``{id, status, expires_on?, not_before?}`` and the message "This API Token is valid and active"
(code 10000). A token the endpoint does not know gets 401, 1000 "Invalid API Token": an unknown value, an
account-owned token at the user endpoint (which is how clients tell the two kinds apart), and, at the account
endpoint, a user-owned token or a token of another account (unverified). A disabled or expired token is reported with
that status and HTTP 200 (unverified).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.emulator.auth import bearer_value
from app.emulator.context import EmulatorDep
from app.emulator.envelope import JSON, CloudflareError, ok
from app.emulator.ids import is_id, iso
from app.emulator.paging import require_id
from app.emulator.permissions import Token

router = APIRouter(tags=["tokens"])

_VALID: JSON = {"code": 10000, "message": "This API Token is valid and active", "type": None}


def _invalid() -> CloudflareError:
    return CloudflareError.single(401, 1000, "Invalid API Token")


def _verified(token: Token) -> JSONResponse:
    status = token.current_status()
    result: JSON = {"id": token.id, "status": status}
    if token.expires_on is not None:
        result["expires_on"] = iso(token.expires_on)
    if token.not_before is not None:
        result["not_before"] = iso(token.not_before)
    return ok(result, messages=[_VALID] if status == "active" else [])


@router.get("/user/tokens/verify")
async def verify_user_token(request: Request, emulator: EmulatorDep) -> JSONResponse:
    token = emulator.store.token_by_value(bearer_value(request.headers))
    if token is None or token.owner != "user":
        raise _invalid()
    return _verified(token)


@router.get("/accounts/{account_id}/tokens/verify")
async def verify_account_token(account_id: str, request: Request, emulator: EmulatorDep) -> JSONResponse:
    require_id(account_id, request.url.path, is_id)
    token = emulator.store.token_by_value(bearer_value(request.headers))
    if token is None or token.owner != "account" or token.account_id != account_id:
        raise _invalid()
    return _verified(token)
