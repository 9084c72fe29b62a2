"""Reading the envelope's details and the rate-limit headers."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from app.cloudflare.envelope import parse_details, parse_rate_limit_headers, unwrap
from app.cloudflare.errors import ErrorDetail, Terminal


def test_structured_ratelimit_header() -> None:
    limits = parse_rate_limit_headers(httpx.Headers({"Ratelimit": '"default";r=50;t=30'}))
    assert (limits.remaining, limits.reset_after, limits.retry_after) == (50, 30, None)


def test_older_ratelimit_headers() -> None:
    limits = parse_rate_limit_headers(httpx.Headers({"x-ratelimit-remaining": "7", "x-ratelimit-reset": "12"}))
    assert (limits.remaining, limits.reset_after) == (7, 12)


def test_retry_after_forms() -> None:
    assert parse_rate_limit_headers(httpx.Headers({"retry-after": "30"})).retry_after == 30
    assert parse_rate_limit_headers(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})).retry_after == 1.5
    future = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert parse_rate_limit_headers(httpx.Headers({"retry-after": future})).retry_after == pytest.approx(60, abs=2)
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert parse_rate_limit_headers(httpx.Headers({"retry-after": past})).retry_after == 0
    assert parse_rate_limit_headers(httpx.Headers({"retry-after": "soon"})).retry_after is None
    assert parse_rate_limit_headers(httpx.Headers()).retry_after is None


def test_details_tolerate_odd_shapes() -> None:
    details = parse_details(
        [
            {"code": "81058", "message": "identical", "source": {"pointer": "/content"}},
            {"code": None, "message": None},
            "a bare string",
            42,
            {"code": True, "message": "bool is not a code"},
        ]
    )
    assert details == (
        ErrorDetail(code=81058, message="identical", pointer="/content"),
        ErrorDetail(code=None, message=""),
        ErrorDetail(code=None, message="a bare string"),
        ErrorDetail(code=None, message="bool is not a code"),
    )
    assert parse_details(None) == ()
    assert parse_details({"code": 1}) == ()


def test_failure_without_errors_still_says_something() -> None:
    with pytest.raises(Terminal) as caught:
        unwrap(
            status=400,
            headers=httpx.Headers(),
            body=b'{"success": false, "errors": [], "messages": [], "result": null}',
            method="POST",
            path="/zones",
            default_retry_after=300,
        )
    assert str(caught.value) == "POST /zones: Cloudflare refused the call (HTTP 400)"
