"""Shared pieces of the Cloudflare client's unit tests: envelopes, a fake clock, and waiting on a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

BASE = "https://api.cloudflare.test/client/v4"
TOKEN = "kflare-test-token-0123456789abcdefABCDEF"
OTHER_TOKEN = "kflare-other-token-9876543210zyxwvuZYXW"
TLS = httpx.create_ssl_context()
"""What a session verifies with by default (`verify=True`), made once: making it loads the CA bundle, 50 ms a
session, and these sessions reach mocks or plain-HTTP servers."""


def ok(result: Any, result_info: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"success": True, "errors": [], "messages": [], "result": result}
    if result_info is not None:
        body["result_info"] = result_info
    return body


def fail(*errors: tuple[int, str]) -> dict[str, Any]:
    return {
        "success": False,
        "errors": [{"code": code, "message": message} for code, message in errors],
        "messages": [],
        "result": None,
    }


async def eventually(condition: Callable[[], bool], *, rounds: int = 10_000) -> None:
    """Let other tasks run until `condition()` holds (no wall-clock time involved)."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def idle(rounds: int = 50) -> None:
    """Let every task run as far as it can without any clock moving."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class FakeClock:
    """A `Clock` that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.time + seconds, future)
        self._sleepers.append(entry)
        try:
            await future
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        self.time += seconds
        self._wake()

    def _wake(self) -> None:
        for deadline, future in list(self._sleepers):
            if deadline <= self.time and not future.done():
                future.set_result(None)

    def next_deadline(self) -> float | None:
        pending = [deadline for deadline, future in self._sleepers if not future.done()]
        return min(pending) if pending else None

    async def run(self, tasks: list[asyncio.Task[Any]], *, max_steps: int = 1_000_000) -> None:
        """Drive `tasks` to completion: let them run, then jump the clock to the next sleeper's deadline."""
        for _ in range(max_steps):
            for _ in range(50):
                await asyncio.sleep(0)
            if all(task.done() for task in tasks):
                return
            deadline = self.next_deadline()
            if deadline is None:
                continue
            self.time = max(self.time, deadline)
            self._wake()
        raise AssertionError("tasks did not finish")
