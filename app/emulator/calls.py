"""The log of API calls, so tests and benchmarks can count what a client really sent to "Cloudflare".

Every call under ``/client/v4`` is logged when it arrives (so a hanging call is visible while it hangs), faulted and
rate-limited ones included; ``status`` is filled in when the answer starts and stays ``null`` for calls that never got
one (hang, drop). ``time`` is the arrival as Unix seconds; ``user_agent`` tells apart clients that share a token
(two replicas of a controller, say). The log keeps the latest :data:`MAX_CALLS` calls.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from app.emulator.envelope import JSON

MAX_CALLS = 200_000


@dataclass
class Call:
    method: str
    path: str
    query: str
    token_id: str | None
    time: float
    status: int | None = None
    duration_ms: float | None = None
    fault: str | None = None
    fault_kind: str | None = None
    user_agent: str | None = None

    def describe(self) -> JSON:
        return {
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "token_id": self.token_id,
            "status": self.status,
            "time": self.time,
            "duration_ms": self.duration_ms,
            "fault": self.fault,
            "fault_kind": self.fault_kind,
            "user_agent": self.user_agent,
        }


class CallLog:
    def __init__(self, size: int = MAX_CALLS) -> None:
        self._calls: deque[Call] = deque(maxlen=size)

    def add(self, call: Call) -> Call:
        self._calls.append(call)
        return call

    def clear(self) -> None:
        self._calls.clear()

    def select(
        self,
        *,
        method: str | None = None,
        path: str | None = None,
        since: float | None = None,
        token_id: str | None = None,
    ) -> list[Call]:
        """Calls matching every given filter; ``path`` is a regular expression searched in the path."""
        pattern = re.compile(path) if path else None
        wanted_method = method.upper() if method else None
        return [
            call
            for call in self._calls
            if (wanted_method is None or call.method == wanted_method)
            and (pattern is None or pattern.search(call.path))
            and (since is None or call.time >= since)
            and (token_id is None or call.token_id == token_id)
        ]
