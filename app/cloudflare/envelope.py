"""Cloudflare's response envelope: turn one HTTP reply into an `ApiResponse` or a typed error.

Every v4 JSON reply is `{"success", "errors", "messages", "result", "result_info"?}`. A reply that is not such an
object (an HTML page from a proxy, truncated JSON, an empty body where JSON was due) becomes `BadResponse`, a
`Transient` error, never a parser exception. This module also reads the rate-limit headers: `Retry-After` /
`retry-after-ms` on a 429, and `Ratelimit: "<name>";r=<remaining>;t=<seconds>` (or the older
`x-ratelimit-remaining` / `x-ratelimit-reset`) on every reply.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from app.cloudflare.errors import BadResponse, CloudflareError, ErrorDetail, RateLimited, classify

SNIPPET_LENGTH = 160


@dataclass(frozen=True, slots=True)
class RateLimitHeaders:
    """What the server said about the token's budget. Any field may be unknown."""

    remaining: int | None = None
    reset_after: float | None = None
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """A successful call: the unwrapped `result`, the `result_info` of list endpoints, and the `messages`."""

    status: int
    result: JsonValue
    result_info: Mapping[str, JsonValue] | None = None
    messages: tuple[ErrorDetail, ...] = ()
    ray_id: str | None = None


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def parse_details(raw: object) -> tuple[ErrorDetail, ...]:
    """The `errors` (or `messages`) list as `ErrorDetail`s, tolerating any shape."""
    if not isinstance(raw, list):
        return ()
    details = []
    for item in raw:
        if isinstance(item, Mapping):
            source = item.get("source")
            pointer = source.get("pointer") if isinstance(source, Mapping) else None
            details.append(
                ErrorDetail(
                    code=_as_int(item.get("code")),
                    message=str(item.get("message") or ""),
                    pointer=pointer if isinstance(pointer, str) else None,
                    chain=parse_details(item.get("error_chain")),
                )
            )
        elif isinstance(item, str):
            details.append(ErrorDetail(code=None, message=item))
    return tuple(details)


def _seconds(value: str | None, *, now: float | None = None) -> float | None:
    """A `Retry-After` value: delta seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds or seconds < 0:  # NaN or in the past
        return 0.0
    return seconds


_STRUCTURED_PARAM = re.compile(r";\s*([a-z]+)\s*=\s*([0-9.]+)")


def parse_rate_limit_headers(headers: Mapping[str, str]) -> RateLimitHeaders:
    """Read `Ratelimit`, `x-ratelimit-*`, `retry-after-ms` and `Retry-After` (header names case-insensitive
    when `headers` is an `httpx.Headers`)."""
    remaining: int | None = None
    reset_after: float | None = None
    structured = headers.get("ratelimit")
    if structured:
        params = dict(_STRUCTURED_PARAM.findall(structured))
        remaining = _as_int(params.get("r"))
        reset_after = _seconds(params.get("t"))
    if remaining is None:
        remaining = _as_int(headers.get("x-ratelimit-remaining"))
    if reset_after is None:
        reset_after = _seconds(headers.get("x-ratelimit-reset"))
    retry_after: float | None = None
    retry_after_ms = headers.get("retry-after-ms")
    if retry_after_ms is not None:
        milliseconds = _seconds(retry_after_ms)
        retry_after = None if milliseconds is None else milliseconds / 1000
    if retry_after is None:
        retry_after = _seconds(headers.get("retry-after"))
    return RateLimitHeaders(remaining=remaining, reset_after=reset_after, retry_after=retry_after)


def _snippet(body: bytes, redact: Callable[[str], str]) -> str:
    text = body[:SNIPPET_LENGTH].decode("utf-8", errors="replace")
    text = re.sub(r"\s+", " ", text).strip()
    text = redact(text)
    return text + ("..." if len(body) > SNIPPET_LENGTH else "")


def _identity(text: str) -> str:
    return text


def unwrap(
    *,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    method: str,
    path: str,
    default_retry_after: float,
    redact: Callable[[str], str] = _identity,
) -> ApiResponse:
    """The `ApiResponse` of a successful reply, or raise the `CloudflareError` the reply stands for.

    `redact` is applied to every text taken from the reply before it goes into an error message.
    `default_retry_after` is the pause a 429 implies when it names none.
    """
    ray_id = headers.get("cf-ray")
    if status == 204:
        return ApiResponse(status=status, result=None, ray_id=ray_id)

    data: dict[str, JsonValue] | None = None
    decode_error: str | None = None
    if not body.strip():
        decode_error = "empty body"
    else:
        try:
            parsed: JsonValue = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            decode_error = f"invalid JSON ({type(exc).__name__} at char {getattr(exc, 'pos', '?')})"
        else:
            if isinstance(parsed, dict) and isinstance(parsed.get("success"), bool):
                data = parsed
            else:
                decode_error = "JSON without the success/errors/result envelope"

    if data is None:
        content_type = headers.get("content-type", "no content type")
        message = f"not a Cloudflare envelope: {decode_error}; {content_type}, {len(body)} bytes"
        if body.strip():
            message += f": {_snippet(body, redact)!r}"
        if status == 429:
            # A rate limit is a rate limit whoever wrote the body: pause rather than hammer.
            retry = parse_rate_limit_headers(headers).retry_after
            raise RateLimited(
                redact(message),
                retry_after=default_retry_after if retry is None else retry,
                status=status,
                method=method,
                path=path,
                ray_id=ray_id,
            )
        raise BadResponse(message, status=status, method=method, path=path, ray_id=ray_id)

    errors = parse_details(data.get("errors"))
    errors = tuple(_redact_detail(detail, redact) for detail in errors)
    if 200 <= status < 300 and data["success"]:
        info = data.get("result_info")
        return ApiResponse(
            status=status,
            result=data.get("result"),
            result_info=info if isinstance(info, Mapping) else None,
            messages=tuple(_redact_detail(d, redact) for d in parse_details(data.get("messages"))),
            ray_id=ray_id,
        )
    raise error_for(
        status=status, headers=headers, errors=errors, method=method, path=path, default_retry_after=default_retry_after
    )


def error_for(
    *,
    status: int,
    headers: Mapping[str, str],
    errors: Sequence[ErrorDetail],
    method: str,
    path: str,
    default_retry_after: float,
) -> CloudflareError:
    """The typed error for a reply with a well-formed envelope that reports failure."""
    cls = classify(status, errors)
    ray_id = headers.get("cf-ray")
    summary = errors[0].message if errors and errors[0].message else "Cloudflare refused the call"
    if cls is RateLimited:
        retry = parse_rate_limit_headers(headers).retry_after
        return RateLimited(
            summary,
            retry_after=default_retry_after if retry is None else retry,
            status=status,
            errors=errors,
            method=method,
            path=path,
            ray_id=ray_id,
        )
    return cls(summary, status=status, errors=errors, method=method, path=path, ray_id=ray_id)


def _redact_detail(detail: ErrorDetail, redact: Callable[[str], str]) -> ErrorDetail:
    return ErrorDetail(
        code=detail.code,
        message=redact(detail.message),
        pointer=None if detail.pointer is None else redact(detail.pointer),
        chain=tuple(_redact_detail(d, redact) for d in detail.chain),
    )
