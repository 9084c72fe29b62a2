"""Small helpers shared by the tests. Tests synchronise by polling with a deadline, never by sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubernetes_asyncio.client.exceptions import ApiException

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T]], *, timeout: float = 20.0, what: str = "", interval: float = 0.1
) -> T:
    """Poll `check` every `interval` until it returns a truthy value or the deadline passes; API errors and failed
    assertions count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = await check()
            if result:
                return result
            last = result
        except (ApiException, AssertionError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: last {last!r}")
        await asyncio.sleep(interval)
