"""Small helpers shared by the tests. Tests synchronise by polling with a deadline, never by sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from app.server import Served

T = TypeVar("T")


async def eventually(
    check: Callable[[], Awaitable[T]], *, timeout: float = 20.0, what: str = "", interval: float = 0.1
) -> T:
    """Poll `check` every `interval` until it returns a truthy value or the deadline passes; API errors and failed
    assertions count as "not yet"."""
    # Here rather than with the module: the benchmarks use these helpers without the client, a second to import.
    from kubernetes_asyncio.client.exceptions import ApiException

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


@contextlib.asynccontextmanager
async def serving(served: Served) -> AsyncIterator[Served]:
    """Run one listener of the process in this event loop until the block ends (its start awaited, its failure to
    start raised)."""
    task = asyncio.create_task(served.server.serve())

    async def started() -> bool:
        if task.done():
            task.result()
        return served.server.started

    try:
        await eventually(started, timeout=20, what=f"the {served.name} listener to start")
        yield served
    finally:
        served.server.should_exit = True
        await asyncio.wait_for(task, 20)


def crd_names(applied: str) -> list[str]:
    """The CRDs' names in what `kubectl apply -o name` printed: `customresourcedefinition.apiextensions.k8s.io/NAME`
    a line."""
    return [line.rpartition("/")[2] for line in applied.split()]
