"""Turns to send a request, shared fairly between flows.

The Kubernetes client sends at most a fixed number of requests at once (`app.kube.client.IN_FLIGHT`). A bulk apply
queues thousands of one kind's writes (each record's create intent, status, Event); with one FIFO, the write of a
Zone those records wait for would wait behind all of them, and the Zones of a 4,000-record apply were created one
every few seconds. So each flow (a resource type) waits in a queue of its own, and a freed turn goes to the next
flow in rotation, as the API server's own fair queuing treats its clients: a flow's wait is bounded by the number of
busy flows, not by the length of the others' backlogs. Within a flow requests go out in the order they came.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class FairTurns:
    def __init__(self, turns: int) -> None:
        self._free = turns
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        """Per flow, its waiters in order; the dict's order is the rotation (a served flow goes to its end)."""

    @contextlib.asynccontextmanager
    async def turn(self, flow: str) -> AsyncIterator[None]:
        """Held while the request is sent and answered."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(flow, deque()).append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on()  # handed a turn as it was cancelled: the turn goes to the next one
                raise
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        while self._waiting:
            flow = next(iter(self._waiting))
            queue = self._waiting.pop(flow)
            waiter = queue.popleft()
            if queue:
                self._waiting[flow] = queue  # to the end of the rotation
            if not waiter.done():  # a cancelled waiter is skipped
                waiter.set_result(None)
                return
        self._free += 1

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())
