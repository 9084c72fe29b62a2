"""Who is calling: the bearer token of a request, checked as Cloudflare checks it, as FastAPI dependencies.

Cloudflare answers differently depending on the API family, and so does the emulator:

============================  ====================================  ========================================
                              core APIs (accounts, zones)           product APIs (DNS and later ones)
============================  ====================================  ========================================
unknown or unusable token     403, 9109 "Invalid access token"      403, 10000 "Authentication error"
missing permission / scope    403, 9109 "Unauthorized to access     403, 10000 "Authentication error"
                              requested resource"
============================  ====================================  ========================================

Before any lookup: no credentials at all → 400 with 9106 and 9107 (missing X-Auth-Email / X-Auth-Key); an
``Authorization`` header that is not ``Bearer <token>`` or a token with characters outside ``[A-Za-z0-9_-]`` → 400,
6003 "Invalid request headers" with 6111 in ``error_chain``; Global API keys (``X-Auth-Key``) are not emulated and
answer 6003 with 6103. The verify endpoints have their own answer for an unknown token (401, 1000), see
:mod:`app.emulator.verify`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from fastapi import Request
from starlette.datastructures import Headers

from app.emulator.context import emulator_of
from app.emulator.envelope import CloudflareError, error
from app.emulator.ids import is_token_value
from app.emulator.permissions import Level, Token
from app.emulator.state import Store


class Family(Enum):
    CORE = "core"
    PRODUCT = "product"

    def invalid_token(self) -> CloudflareError:
        if self is Family.CORE:
            return CloudflareError.single(403, 9109, "Invalid access token")
        return CloudflareError.single(403, 10000, "Authentication error")

    def denied(self) -> CloudflareError:
        if self is Family.CORE:
            return CloudflareError.single(403, 9109, "Unauthorized to access requested resource")
        return CloudflareError.single(403, 10000, "Authentication error")


def bearer_value(headers: Headers) -> str:
    """The token a request presents, or the 400 Cloudflare gives before looking it up."""
    authorization = headers.get("authorization")
    if authorization is None:
        if headers.get("x-auth-key") is not None or headers.get("x-auth-email") is not None:
            raise CloudflareError(
                400,
                [error(6003, "Invalid request headers", chain=[(6103, "Invalid format for X-Auth-Key header")])],
            )
        raise CloudflareError(
            400, [error(9106, "Missing X-Auth-Email header"), error(9107, "Missing X-Auth-Key header")]
        )
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not is_token_value(value):
        raise CloudflareError(
            400,
            [error(6003, "Invalid request headers", chain=[(6111, "Invalid format for Authorization header")])],
        )
    return value


def token_of(headers: Headers, store: Store) -> Token | None:
    """The known token a request presents, refusing nothing: for the call log and the rate limiter."""
    authorization = headers.get("authorization") or ""
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return store.token_by_value(value.strip())


@dataclass(frozen=True)
class Principal:
    """An authenticated, usable token and the API family whose error codes it gets."""

    token: Token
    family: Family

    def denied(self) -> CloudflareError:
        return self.family.denied()

    def require(self, resource: str, level: Level) -> None:
        if not self.token.can(resource, level):
            raise self.denied()

    def require_account(self, account_id: str) -> None:
        if not self.token.reaches_account(account_id):
            raise self.denied()


def authenticate(request: Request, family: Family) -> Principal:
    value = bearer_value(request.headers)
    token = emulator_of(request).store.token_by_value(value)
    if token is None or not token.usable():
        raise family.invalid_token()
    return Principal(token, family)
