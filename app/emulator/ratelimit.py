"""Cloudflare's global API rate limit: by default 1,200 calls per 300 seconds per budget, then a lockout.

The window **slides**: a call is allowed when fewer than ``calls`` calls of the same budget were allowed in the last
``seconds``. That is the strictest reading of "1,200 per five minutes" (a client that stays under it also stays under
any fixed window), which is what a conformance target should be. The call that finds the window full is refused with
429 and starts the lockout: every call of that budget is refused until ``lockout`` seconds have passed, and the budget
starts empty afterwards. Refused calls do not count.

A budget is an account-owned token, or all the user-owned tokens of one user (:attr:`Token.bucket
<app.emulator.permissions.Token.bucket>`). Calls whose token is unknown or unusable draw on no budget.

Every reply carries ``Ratelimit: "default";r=<remaining>;t=<seconds until a slot frees>`` and ``Ratelimit-Policy:
"default";q=<calls>;w=<seconds>``; a 429 adds ``Retry-After`` (whole seconds, rounded up).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.emulator.envelope import JSON


@dataclass(frozen=True)
class Limits:
    calls: int = 1200
    seconds: float = 300.0
    lockout: float = 300.0


@dataclass
class _Budget:
    calls: deque[float] = field(default_factory=deque)
    locked_until: float = 0.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int
    reset_after: int  # seconds until the window frees a slot (or the lockout ends)
    retry_after: int | None = None


class RateLimiter:
    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._budgets: dict[str, _Budget] = {}

    def configure(self, limits: Limits, *, reset: bool = True) -> None:
        self.limits = limits
        if reset:
            self._budgets.clear()

    def reset(self) -> None:
        self._budgets.clear()

    def _prune(self, budget: _Budget, now: float) -> None:
        horizon = now - self.limits.seconds
        while budget.calls and budget.calls[0] <= horizon:
            budget.calls.popleft()

    def hit(self, key: str) -> Decision:
        """Count one call of budget ``key``, or refuse it."""
        now = self._clock()
        budget = self._budgets.setdefault(key, _Budget())
        if budget.locked_until > now:
            wait = _ceil(budget.locked_until - now)
            return Decision(False, 0, wait, retry_after=wait)
        self._prune(budget, now)
        if len(budget.calls) >= self.limits.calls:
            budget.calls.clear()
            budget.locked_until = now + self.limits.lockout
            wait = _ceil(self.limits.lockout)
            return Decision(False, 0, wait, retry_after=wait)
        budget.calls.append(now)
        return Decision(True, self.limits.calls - len(budget.calls), _ceil(budget.calls[0] + self.limits.seconds - now))

    def headers(self, decision: Decision | None) -> dict[str, str]:
        if decision is None:  # no budget: show the full quota
            remaining, reset_after = self.limits.calls, _ceil(self.limits.seconds)
        else:
            remaining, reset_after = decision.remaining, decision.reset_after
        out = {
            "Ratelimit": f'"default";r={remaining};t={reset_after}',
            "Ratelimit-Policy": f'"default";q={self.limits.calls};w={_ceil(self.limits.seconds)}',
        }
        if decision is not None and decision.retry_after is not None:
            out["Retry-After"] = str(decision.retry_after)
        return out

    def describe(self) -> JSON:
        now = self._clock()
        budgets: JSON = {}
        for key, budget in self._budgets.items():
            self._prune(budget, now)
            budgets[key] = {"used": len(budget.calls), "locked_for": max(0.0, round(budget.locked_until - now, 3))}
        return {
            "calls": self.limits.calls,
            "seconds": self.limits.seconds,
            "lockout": self.limits.lockout,
            "window": "sliding",
            "budgets": budgets,
        }


def _ceil(seconds: float) -> int:
    return max(0, math.ceil(seconds - 1e-9))
