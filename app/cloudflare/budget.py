"""The per-token call budget every caller in the process shares.

Cloudflare allows 1,200 calls per 5 minutes per user or account-owned token and, past that, refuses every call of
the token for five minutes. `BudgetRegistry` holds one `TokenBudget` per token, keyed by the token's SHA-256 (never
the token), and every `CloudflareClient` of that token draws from it, so all controllers together stay under the
configured share of the limit (80 % by default: 960 calls per 300 s).

The budget is a sliding window that cannot burst past the server's window, whatever the latency. A call takes a
slot before it is sent and gives it back when its answer (or failure) arrives. The server counts a call at some
moment between those two, so the budget counts a call in flight as inside every window, and a finished call as
inside every window that ends less than `window` seconds after it finished. A new call is sent only when fewer than
`capacity` calls are counted that way; hence any `window` seconds of the server's clock see at most `capacity` of
our calls. A call that failed before anything was sent (no connection) gives its slot back uncounted.

When the budget is spent a caller waits (asynchronously, first come first served) instead of sending. When a 429
for the global limit arrives anyway, or the server reports no calls left, the whole token pauses for the server's
`Retry-After` (or its reset time): every caller of the token waits, callers of other tokens do not.

`TokenBudget.stats()` returns a `BudgetStats` snapshot (calls by outcome, seconds spent waiting, budget left) for a
metrics exporter to read. Time comes from an injectable `Clock` so tests can drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from app.clock import Clock, MonotonicClock
from app.cloudflare.errors import OUTCOMES, Outcome, RateLimited

logger = logging.getLogger(__name__)

CLOUDFLARE_LIMIT = 1200
CLOUDFLARE_WINDOW = 300.0


@dataclass(frozen=True, slots=True)
class BudgetConfig:
    """`limit` calls per `window` seconds is the server's limit; the budget uses `share` of it. `enabled=False`
    keeps the counters but never waits. `max_wait`, when set, makes a call that would wait longer than that fail
    at once with `RateLimited` (not sent) instead of waiting."""

    limit: int = CLOUDFLARE_LIMIT
    window: float = CLOUDFLARE_WINDOW
    share: float = 0.8
    enabled: bool = True
    max_wait: float | None = None

    def __post_init__(self) -> None:
        if self.limit < 1 or self.window <= 0:
            raise ValueError("limit and window must be positive")
        if not 0 < self.share <= 1:
            raise ValueError("share must be in (0, 1]")
        if self.max_wait is not None and self.max_wait < 0:
            raise ValueError("max_wait must not be negative")

    @property
    def capacity(self) -> int:
        """Calls allowed per window: the configured share of the limit, at least one."""
        return max(1, math.floor(self.limit * self.share + 1e-9))


@dataclass(frozen=True, slots=True)
class BudgetStats:
    """A snapshot of one token's budget."""

    token: str
    """The token's fingerprint (a short hash), or the budget key a caller chose."""
    capacity: int
    window: float
    calls: Mapping[Outcome, int]
    """Calls answered (or failed) so far, by outcome."""
    waited_seconds: float
    """Total time callers spent waiting on this budget."""
    remaining: int
    """Calls that could be sent right now without waiting (0 while paused)."""
    in_flight: int
    waiting: int
    """Callers waiting for a slot right now."""
    paused_for: float
    """Seconds left of a pause ordered by the server (429 or no calls left), 0 when none."""
    pauses: int
    refused: int
    """Calls failed with `RateLimited` without being sent because the wait would pass `max_wait`."""
    server_remaining: int | None = None
    """The last `remaining` count the server reported, if it reports one."""


@dataclass(slots=True)
class Slot:
    """One call's claim on the budget. The caller sets `outcome`, and `sent=False` when nothing reached the
    server."""

    outcome: Outcome | None = None
    sent: bool = True
    counted: bool = field(default=True, repr=False)


class TokenBudget:
    """The sliding-window budget of one token. Create through `BudgetRegistry`."""

    def __init__(self, name: str, config: BudgetConfig, clock: Clock) -> None:
        self.name = name
        self.config = config
        self._clock = clock
        self._finished: deque[float] = deque()
        self._in_flight = 0
        self._waiting = 0
        self._waited = 0.0
        self._paused_until = -math.inf
        self._pauses = 0
        self._refused = 0
        self._server_remaining: int | None = None
        self._calls: dict[Outcome, int] = dict.fromkeys(OUTCOMES, 0)
        self._queue: asyncio.Lock | None = None
        self._changed: asyncio.Event | None = None

    def __repr__(self) -> str:
        return f"TokenBudget(name={self.name!r}, capacity={self.config.capacity}, window={self.config.window})"

    # -- accounting -------------------------------------------------------------------------------------------

    def _expire(self, now: float) -> None:
        horizon = now - self.config.window
        finished = self._finished
        while finished and finished[0] <= horizon:
            finished.popleft()

    def _delay(self, now: float) -> float:
        """Seconds until a call may be sent: 0 now, `inf` when only a finishing call can free a slot."""
        if self._paused_until > now:
            return self._paused_until - now
        if not self.config.enabled:
            return 0.0
        self._expire(now)
        excess = self._in_flight + len(self._finished) - self.config.capacity + 1
        if excess <= 0:
            return 0.0
        if excess > len(self._finished):
            return math.inf
        return max(self._finished[excess - 1] + self.config.window - now, 1e-6)

    # -- waiting ----------------------------------------------------------------------------------------------

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _sleep_until(self, until: float) -> None:
        delay = until - self._clock.now()
        if delay > 0:
            await self._clock.sleep(delay)

    async def _wait(self, seconds: float) -> None:
        """Wait `seconds` (from now), or until a call ends or a pause changes, whichever is first."""
        if self._changed is None:
            self._changed = asyncio.Event()
        changed: asyncio.Future[object] = asyncio.ensure_future(self._changed.wait())
        waits: set[asyncio.Future[object]] = {changed}
        if not math.isinf(seconds):
            waits.add(asyncio.ensure_future(self._sleep_until(self._clock.now() + seconds)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    async def acquire(self) -> Slot:
        """Wait until the budget allows one more call and claim it. Raises `RateLimited` (nothing sent) when
        `max_wait` is set and the wait would be longer."""
        now = self._clock.now()
        if self._queue is None:
            self._queue = asyncio.Lock()
        if not self._queue.locked() and self._delay(now) == 0:
            self._in_flight += 1
            return Slot()
        start = now
        self._waiting += 1
        try:
            async with self._queue:
                while True:
                    now = self._clock.now()
                    delay = self._delay(now)
                    if delay == 0:
                        break
                    max_wait = self.config.max_wait
                    if max_wait is not None and now - start + delay > max_wait:
                        self._refused += 1
                        retry_after = delay if not math.isinf(delay) else self.config.window
                        raise RateLimited(
                            f"the token's call budget is spent; waiting {retry_after:.1f} s would pass max_wait",
                            retry_after=retry_after,
                            status=None,
                            sent=False,
                        )
                    await self._wait(delay)
                self._in_flight += 1
                return Slot()
        finally:
            self._waiting -= 1
            waited = self._clock.now() - start
            self._waited += waited
            if waited >= 1.0:
                logger.info(
                    "waited %.1f s for the Cloudflare call budget",
                    waited,
                    extra={"token": self.name, "waited_seconds": round(waited, 3)},
                )

    def release(self, slot: Slot) -> None:
        """Give the slot back: count the call's outcome and start its time in the window."""
        if not slot.counted:
            return
        slot.counted = False
        self._in_flight -= 1
        if slot.outcome is not None:
            self._calls[slot.outcome] += 1
        if slot.sent and self.config.enabled:
            self._finished.append(self._clock.now())
        self._notify()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        """`acquire()` and, whatever happens, `release()`."""
        claimed = await self.acquire()
        try:
            yield claimed
        finally:
            self.release(claimed)

    # -- what the server says ---------------------------------------------------------------------------------

    def pause(self, seconds: float, *, reason: str) -> None:
        """Hold every call of the token for `seconds` (extends, never shortens, a pause in force)."""
        now = self._clock.now()
        until = now + max(0.0, seconds)
        if until > self._paused_until:
            if self._paused_until <= now:
                self._pauses += 1
            self._paused_until = until
            logger.warning(
                "pausing every Cloudflare call of the token for %.1f s: %s",
                seconds,
                reason,
                extra={"token": self.name, "pause_seconds": round(seconds, 3)},
            )
        self._notify()

    def observe_remaining(self, remaining: int | None, reset_after: float | None) -> None:
        """Record the server's count of calls left; when it is zero, pause until its reset."""
        if remaining is None:
            return
        self._server_remaining = remaining
        if remaining <= 0 and reset_after is not None and reset_after > 0:
            self.pause(reset_after, reason="the server reports no calls left in its window")

    # -- snapshot ---------------------------------------------------------------------------------------------

    def stats(self) -> BudgetStats:
        now = self._clock.now()
        self._expire(now)
        paused_for = max(0.0, self._paused_until - now)
        used = self._in_flight + (len(self._finished) if self.config.enabled else 0)
        remaining = 0 if paused_for > 0 else max(0, self.config.capacity - used)
        return BudgetStats(
            token=self.name,
            capacity=self.config.capacity,
            window=self.config.window,
            calls=dict(self._calls),
            waited_seconds=self._waited,
            remaining=remaining,
            in_flight=self._in_flight,
            waiting=self._waiting,
            paused_for=paused_for,
            pauses=self._pauses,
            refused=self._refused,
            server_remaining=self._server_remaining,
        )


class BudgetRegistry:
    """Every token budget of the process, keyed by a hash of the token (`Secret.key`)."""

    def __init__(self, config: BudgetConfig | None = None, clock: Clock | None = None) -> None:
        self.config = config or BudgetConfig()
        self.clock: Clock = clock or MonotonicClock()
        self._budgets: dict[str, TokenBudget] = {}

    def get(self, key: str, *, name: str, config: BudgetConfig | None = None) -> TokenBudget:
        """The budget for `key`, created on first use (with `config` or the registry's)."""
        budget = self._budgets.get(key)
        if budget is None:
            budget = TokenBudget(name, config or self.config, self.clock)
            self._budgets[key] = budget
        return budget

    def stats(self) -> list[BudgetStats]:
        return [budget.stats() for budget in self._budgets.values()]

    def __repr__(self) -> str:
        return f"BudgetRegistry(tokens={len(self._budgets)}, config={self.config!r})"
