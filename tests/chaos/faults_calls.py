"""Reading the emulator's call log for the fault scenarios: the controller's calls (told apart from the test's own by
their User-Agent), the retries among them, and the busiest window."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

KFLARE_AGENT = "kflare/"
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def kflare_calls(calls: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The controller's calls, oldest first."""
    return sorted((c for c in calls if (c.get("user_agent") or "").startswith(KFLARE_AGENT)), key=lambda c: c["time"])


def faulted(call: dict[str, Any]) -> bool:
    """Whether the call met an injected fault, or Cloudflare's rate limiter (a 429 with no fault)."""
    return call["fault"] is not None or call["status"] == 429


def retries(calls: list[dict[str, Any]]) -> int:
    """Calls that repeat an earlier call (same method, path and query) that met a fault."""
    pending: set[tuple[str, str, str]] = set()
    count = 0
    for call in calls:
        key = (call["method"], call["path"], call["query"])
        if key in pending:
            count += 1
            pending.discard(key)
        if faulted(call):
            pending.add(key)
    return count


def busiest_window(calls: list[dict[str, Any]], seconds: float) -> int:
    """The most calls that arrived within any `seconds` (a sliding window, as Cloudflare's)."""
    times = sorted(c["time"] for c in calls)
    best, start = 0, 0
    for end, moment in enumerate(times):
        while times[start] <= moment - seconds:
            start += 1
        best = max(best, end - start + 1)
    return best
