"""`CloudflareCalls`: the generic layer of the Cloudflare client, one call of one token at a time.

Every call goes the same way: take a slot from the token's budget (waiting if it is spent), send through the
process's shared HTTP client within the time bounds, read the rate-limit headers, unwrap the envelope into a typed
result or raise a typed error, give the slot back with the call's outcome. `request()` answers an `ApiResponse`,
`fetch()` a model and `iterate()` an async iterator of models in any pagination style; `CloudflareClient`
(`app.cloudflare.client`) adds the typed calls of each object type on top.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TypeAlias, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from app.cloudflare.budget import Slot, TokenBudget
from app.cloudflare.envelope import ApiResponse, parse_rate_limit_headers, unwrap
from app.cloudflare.errors import BadResponse, CloudflareError, RateLimited, is_global_rate_limit
from app.cloudflare.http import CloudflareHTTP, RawResponse
from app.cloudflare.pagination import PageStyle, paginate
from app.cloudflare.secret import Secret

# Logged under the client's name, the one Cloudflare calls have always been filtered by.
logger = logging.getLogger("app.cloudflare.client")

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")

JsonBody: TypeAlias = "str | int | float | bool | Sequence[JsonBody] | Mapping[str, JsonBody] | None"
"""What a request may send as JSON. Its containers are read-only (unlike those of pydantic's `JsonValue`, which answers
are read as), so that a caller's `dict[str, list[str]]` passes as it is."""

Files = Sequence[tuple[str, tuple[str | None, bytes | str, str]]]
"""Multipart parts: `(field name, (file name, content, content type))`."""


def segment(value: str) -> str:
    """A path segment, percent-encoded so that an ID cannot change the path."""
    if not value:
        raise ValueError("an empty identifier in a Cloudflare path")
    return quote(value, safe="")


class CloudflareCalls:
    """One token's calls to Cloudflare's v4 API: budgeted, bounded, unwrapped and logged."""

    def __init__(self, http: CloudflareHTTP, budget: TokenBudget, token: str | Secret) -> None:
        self._http = http
        self._budget = budget
        self._token = Secret.of(token)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(token={self._token.fingerprint!r}, base_url={self._http.config.base_url!r})"

    @property
    def fingerprint(self) -> str:
        """The short hash that names this client's token in logs and statistics."""
        return self._token.fingerprint

    @property
    def budget(self) -> TokenBudget:
        return self._budget

    # -- the generic layer ------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, object] | None = None,
        json: JsonBody = None,
        content: bytes | None = None,
        data: Mapping[str, object] | None = None,
        files: Files | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ApiResponse:
        """One call whose reply is a Cloudflare envelope: its `ApiResponse`, or a `CloudflareError`."""
        return await self._call(
            method,
            path,
            self._unwrap,
            params=params,
            json=json,
            content=content,
            data=data,
            files=files,
            headers=headers,
        )

    async def request_raw(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, object] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> RawResponse:
        """One call whose successful reply is not an envelope (a Worker script's source, say). Failures are still
        unwrapped into `CloudflareError`s."""
        return await self._call(method, path, self._unwrap_raw, params=params, headers=headers)

    async def fetch(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        params: Mapping[str, object] | None = None,
        json: JsonBody = None,
        files: Files | None = None,
        data: Mapping[str, object] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> M:
        """One call whose `result` is one object, parsed into `model`."""
        response = await self.request(method, path, params=params, json=json, files=files, data=data, headers=headers)
        return self._parse(model, response.result, method, path)

    def iterate(
        self,
        path: str,
        model: type[M],
        *,
        style: PageStyle = PageStyle.PAGE,
        params: Mapping[str, object] | None = None,
        per_page: int | None = None,
        items_key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[M]:
        """Every item of a list endpoint, across its pages, parsed into `model`. Each page is one call."""

        async def fetch_page(query: Mapping[str, object]) -> ApiResponse:
            return await self.request("GET", path, params=query, headers=headers)

        async def items() -> AsyncIterator[M]:
            async for item in paginate(fetch_page, style, params=params, per_page=per_page, items_key=items_key):
                yield self._parse(model, item, "GET", path)

        return items()

    # -- the call ---------------------------------------------------------------------------------------------

    def _parse(self, model: type[M], value: object, method: str, path: str) -> M:
        try:
            return model.model_validate(value if value is not None else {})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'result'}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False)[:5]
            )
            raise BadResponse(
                self._token.redact(f"the result does not fit {model.__name__}: {problems}"),
                method=method,
                path=path,
            ) from None

    def _unwrap(self, reply: RawResponse, method: str, path: str) -> ApiResponse:
        return unwrap(
            status=reply.status,
            headers=reply.headers,
            body=reply.body,
            method=method,
            path=path,
            default_retry_after=self._budget.config.window,
            redact=self._token.redact,
        )

    def _unwrap_raw(self, reply: RawResponse, method: str, path: str) -> RawResponse:
        if 200 <= reply.status < 300:
            return reply
        self._unwrap(reply, method, path)  # raises: a failure is an envelope like any other
        raise BadResponse(f"HTTP {reply.status} reported success", status=reply.status, method=method, path=path)

    async def _call(
        self,
        method: str,
        path: str,
        convert: Callable[[RawResponse, str, str], R],
        *,
        params: Mapping[str, object] | None = None,
        json: JsonBody = None,
        content: bytes | None = None,
        data: Mapping[str, object] | None = None,
        files: Files | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> R:
        method = method.upper()
        loop = asyncio.get_running_loop()
        async with self._budget.slot() as slot:
            request = self._http.client.build_request(
                method,
                path,
                params=_query(params),
                json=json,
                content=content,
                data=data,
                files=files,
                headers={**(headers or {}), "Authorization": f"Bearer {self._token.reveal()}"},
            )
            started = loop.time()
            try:
                reply = await self._http.send(request, redact=self._token.redact, path=path)
                self._observe(reply)
                result = convert(reply, method, path)
            except CloudflareError as exc:
                self._failed(slot, exc, method, path, loop.time() - started)
                raise
            slot.outcome = "ok"
            logger.debug(
                "Cloudflare %s %s: %d",
                method,
                path,
                reply.status,
                extra=self._log_fields(method, path, reply.status, "ok", loop.time() - started),
            )
            return result

    def _observe(self, reply: RawResponse) -> None:
        limits = parse_rate_limit_headers(reply.headers)
        self._budget.observe_remaining(limits.remaining, limits.reset_after)

    def _failed(self, slot: Slot, exc: CloudflareError, method: str, path: str, seconds: float) -> None:
        slot.outcome = exc.outcome
        slot.sent = exc.sent
        if isinstance(exc, RateLimited) and exc.status == 429 and is_global_rate_limit(exc.errors):
            self._budget.pause(exc.retry_after, reason=f"429 on {method} {path}")
        # Not-found and conflict are answers reconcilers expect; the others they will report themselves.
        level = logging.DEBUG if exc.outcome in ("not_found", "conflict") else logging.INFO
        logger.log(
            level,
            "Cloudflare %s %s failed: %s",
            method,
            path,
            exc,
            extra=self._log_fields(method, path, exc.status, exc.outcome, seconds),
        )

    def _log_fields(
        self, method: str, path: str, status: int | None, outcome: str, seconds: float
    ) -> dict[str, object]:
        return {
            "cf_method": method,
            "cf_path": path,
            "cf_status": status,
            "cf_outcome": outcome,
            "cf_duration_ms": round(seconds * 1000, 1),
            "token": self._token.fingerprint,
        }


def _query(params: Mapping[str, object] | None) -> httpx.QueryParams | None:
    """Query parameters the way Cloudflare reads them: booleans as true/false, lists as repeated keys, None
    dropped."""
    if not params:
        return None
    items: list[tuple[str, str | int | float | bool | None]] = []
    for key, value in params.items():
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is None:
                continue
            if isinstance(item, bool):
                items.append((key, "true" if item else "false"))
            else:
                # What httpx itself makes of a value that is no string or number.
                items.append((key, item if isinstance(item, str | int | float) else str(item)))
    return httpx.QueryParams(items)
