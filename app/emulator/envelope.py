"""Cloudflare's v4 response envelope, and the one exception every route raises to refuse a request.

Every JSON answer, success or failure, is ``{"success", "errors", "messages", "result"}`` plus ``result_info`` on
lists. Failures carry ``result: null`` and errors ``{"code" >= 1000, "message", "error_chain"?, "source"?}``.

Codes used across object types (those marked *unverified* are the emulator's choice where no source settles it):

======  ======  ===========================================================  =============
HTTP    code    meaning                                                      confidence
======  ======  ===========================================================  =============
400     6003    invalid request headers (chain 6111: bad Authorization)      observed
400     6007    malformed JSON in request body                               observed
400     9106/7  no credentials at all (missing X-Auth-Email / X-Auth-Key)     observed
400     9207    request body does not fit the endpoint's schema              unverified
400     7003    could not route (malformed ID or unknown path), + 7000        observed
429     971     global rate limit                                            observed
500     10001   emulator bug                                                 unverified
======  ======  ===========================================================  =============
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import NotRequired, TypedDict, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, JsonValue, ValidationError

JSON = dict[str, JsonValue]
M = TypeVar("M", bound=BaseModel)

INVALID_BODY = 9207


class Pointer(TypedDict):
    pointer: str


class ChainEntry(TypedDict):
    code: int
    message: str


class ErrorEntry(TypedDict):
    """One entry of an envelope's ``errors``."""

    code: int
    message: str
    source: NotRequired[Pointer]
    error_chain: NotRequired[list[ChainEntry]]


class Envelope(TypedDict):
    success: bool
    errors: list[ErrorEntry]
    messages: list[JSON]
    result: JsonValue
    result_info: NotRequired[JSON]


def error(
    code: int,
    message: str,
    *,
    pointer: str | None = None,
    chain: Sequence[tuple[int, str]] = (),
) -> ErrorEntry:
    """One entry of ``errors``; ``chain`` becomes Cloudflare's ``error_chain`` of (code, message)."""
    entry: ErrorEntry = {"code": code, "message": message}
    if pointer is not None:
        entry["source"] = {"pointer": pointer}
    if chain:
        entry["error_chain"] = [{"code": c, "message": m} for c, m in chain]
    return entry


def envelope(
    result: JsonValue,
    *,
    result_info: JSON | None = None,
    messages: Sequence[JSON] = (),
    errors: Sequence[ErrorEntry] = (),
) -> Envelope:
    body: Envelope = {
        "success": not errors,
        "errors": list(errors),
        "messages": list(messages),
        "result": None if errors else result,
    }
    if result_info is not None:
        body["result_info"] = result_info
    return body


def ok(result: JsonValue, *, result_info: JSON | None = None, messages: Sequence[JSON] = ()) -> JSONResponse:
    return JSONResponse(envelope(result, result_info=result_info, messages=messages))


class CloudflareError(Exception):
    """Raised anywhere below a route; the app turns it into an enveloped failure with this status."""

    def __init__(
        self,
        status: int,
        errors: Sequence[ErrorEntry],
        *,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status}: " + "; ".join(f"{e['code']} {e['message']}" for e in errors))
        self.status = status
        self.errors = list(errors)
        self.headers = dict(headers or {})

    @classmethod
    def single(
        cls,
        status: int,
        code: int,
        message: str,
        *,
        pointer: str | None = None,
        chain: Sequence[tuple[int, str]] = (),
    ) -> CloudflareError:
        return cls(status, [error(code, message, pointer=pointer, chain=chain)])

    def with_headers(self, headers: Mapping[str, str]) -> CloudflareError:
        self.headers.update(headers)
        return self

    def response(self) -> JSONResponse:
        return JSONResponse(envelope(None, errors=self.errors), status_code=self.status, headers=self.headers)


def no_route(path: str) -> CloudflareError:
    """What Cloudflare's router answers for an unknown path or an ID that is not an ID."""
    return CloudflareError(
        400,
        [
            error(7003, f"Could not route to {path}, perhaps your object identifier is invalid?"),
            error(7000, "No route for that URI"),
        ],
    )


def invalid_body(message: str, *, pointer: str | None = None) -> CloudflareError:
    return CloudflareError.single(400, INVALID_BODY, message, pointer=pointer)


def rate_limited(retry_after: int) -> CloudflareError:
    return CloudflareError.single(
        429,
        971,
        "Please wait and consider throttling your request speed",
    ).with_headers({"Retry-After": str(retry_after)})


def pointer_of(exc: ValidationError) -> tuple[str, str | None]:
    """The first pydantic error as Cloudflare words it: a message and a JSON pointer to the field."""
    first = exc.errors()[0]
    location = [str(part) for part in first.get("loc", ())]
    pointer = "/" + "/".join(location) if location else None
    field = ".".join(location) or "body"
    return f"{field}: {first.get('msg', 'invalid value')}", pointer


async def read_json(request: Request) -> JsonValue:
    """The request body as JSON; an empty body reads as ``{}`` so schema checks name the missing fields."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        decoded: JsonValue = json.loads(raw)
    except ValueError:
        raise CloudflareError.single(400, 6007, "Malformed JSON in request body") from None
    return decoded


def parse_model(
    model: type[M],
    data: object,
    on_error: Callable[[str, str | None], CloudflareError] = lambda m, p: invalid_body(m, pointer=p),
) -> M:
    """Validate a decoded body against a pydantic model, refusing it the way the calling endpoint does."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        message, pointer = pointer_of(exc)
        raise on_error(message, pointer) from None
