"""A work queue with controller-runtime's guarantees.

- A key waiting in the queue is there once, however often it is added (de-duplication).
- A key is never handed to two workers at once: added while being processed, it is queued again when done.
- Failures back off per key, exponentially from 5 ms to 1,000 s (about 16 minutes), until the key succeeds.
- `add_after` schedules a key later; an earlier schedule of the same key wins.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

BASE_DELAY = 0.005
MAX_DELAY = 1000.0


class ShutDown(Exception):
    """The queue was shut down; workers should return."""


@dataclass
class WorkQueue(Generic[K]):
    name: str
    base_delay: float = BASE_DELAY
    max_delay: float = MAX_DELAY
    _queue: deque[K] = field(default_factory=deque)
    _dirty: set[K] = field(default_factory=set)
    _processing: set[K] = field(default_factory=set)
    _added_at: dict[K, float] = field(default_factory=dict)
    _failures: dict[K, int] = field(default_factory=dict)
    _waiting: list[tuple[float, int, K]] = field(default_factory=list)
    _waiting_at: dict[K, float] = field(default_factory=dict)
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _getters: deque[asyncio.Future[None]] = field(default_factory=deque)
    _timer: asyncio.TimerHandle | None = None
    _shutdown: bool = False
    _started: dict[K, float] = field(default_factory=dict)
    last_wait: float = 0.0  # how long the key handed out by the last get() had waited

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def depth(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing waiting to be handed out and nothing being worked on (keys scheduled for later do not count)."""
        return not self._queue and not self._processing

    def processing_seconds(self) -> list[float]:
        """How long each key handed out is being worked on (the queue's unfinished-work metrics)."""
        now = time.monotonic()
        return [now - started for started in self._started.values()]

    def is_processing(self, key: K) -> bool:
        return key in self._processing

    def is_queued(self, key: K) -> bool:
        """Whether `key` waits to be handed out as soon as a worker is free (not: scheduled later, backing off)."""
        return key in self._dirty

    def add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        self._added_at.setdefault(key, time.monotonic())
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._wake()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        when = time.monotonic() + delay
        current = self._waiting_at.get(key)
        if current is not None and current <= when:
            return
        self._waiting_at[key] = when
        heapq.heappush(self._waiting, (when, next(self._counter), key))
        self._arm_timer()

    def add_rate_limited(self, key: K) -> float:
        """Queue `key` after its back-off; each call before `forget` doubles it."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.max_delay, self.base_delay * 2.0**failures)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        while not self._queue:
            if self._shutdown:
                raise ShutDown
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._getters:
                    self._getters.remove(waiter)
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        now = time.monotonic()
        self.last_wait = now - self._added_at.pop(key, now)
        self._started[key] = now
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        self._started.pop(key, None)
        if key in self._dirty:
            self._added_at.setdefault(key, time.monotonic())
            self._queue.append(key)
            self._wake()

    def shut_down(self) -> None:
        self._shutdown = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake()

    def _wake(self) -> None:
        # Wake one sleeping worker per queued key (all of them on shutdown); add() stays synchronous.
        wake = len(self._getters) if self._shutdown else len(self._queue)
        while wake > 0 and self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                wake -= 1

    def _arm_timer(self) -> None:
        if not self._waiting:
            return
        loop = asyncio.get_running_loop()
        when = self._waiting[0][0]
        if self._timer is not None:
            if self._timer.when() <= loop.time() + (when - time.monotonic()) + 1e-3:
                return
            self._timer.cancel()
        self._timer = loop.call_later(max(0.0, when - time.monotonic()), self._release_due)

    def _release_due(self) -> None:
        self._timer = None
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            when, _, key = heapq.heappop(self._waiting)
            if self._waiting_at.get(key) == when:
                del self._waiting_at[key]
                self.add(key)
        self._arm_timer()
