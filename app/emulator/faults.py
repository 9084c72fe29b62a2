"""Injected faults: what the network and Cloudflare's edge do to a client on a bad day.

A fault matches a call when its ``route`` regular expression is found (``re.search``) in ``"METHOD /client/v4/path"``
(no query string), then fires with ``probability`` while its ``count`` lasts (``null``: forever). Kinds:

``latency``  wait ``latency_ms``, then answer normally. Every matching latency fault adds up.
``status``   answer ``status`` with a Cloudflare-shaped error body (``code``/``message`` override the defaults:
             971 for 429 as Cloudflare sends, the emulator's own 10001..10004 for 500..504), or
             with ``html: true`` the HTML page Cloudflare's proxy serves on 502/503/504; ``retry_after`` adds the
             ``Retry-After`` header (useful with 429).
``hang``     never answer; the request ends only when the client gives up and disconnects.
``drop``     close the connection without any response.

Faults act in front of the API, like the network would: a faulted call is logged but neither authenticated nor
counted against the rate limit (a latency fault's call, which then goes through, is). Of several matching faults the
oldest ``status``/``hang``/``drop`` one fires.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.emulator.envelope import JSON
from app.emulator.ids import new_id

Kind = Literal["latency", "status", "hang", "drop"]


class FaultSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    route: str
    kind: Kind
    latency_ms: int | None = Field(default=None, ge=0)
    status: int | None = Field(default=None, ge=400, le=599)
    count: int | None = Field(default=None, ge=1)
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    html: bool = False
    code: int | None = None
    message: str | None = None
    retry_after: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _complete(self) -> Self:
        try:
            re.compile(self.route)
        except re.error as exc:
            raise ValueError(f"route is not a regular expression: {exc}") from None
        if self.kind == "latency" and self.latency_ms is None:
            raise ValueError("a latency fault needs latency_ms")
        if self.kind == "status" and self.status is None:
            raise ValueError("a status fault needs status")
        return self


@dataclass
class Fault:
    spec: FaultSpec
    id: str = field(default_factory=new_id)
    fired: int = 0

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.spec.route)

    @property
    def remaining(self) -> int | None:
        return None if self.spec.count is None else max(0, self.spec.count - self.fired)

    def matches(self, call: str) -> bool:
        return self.remaining != 0 and self._pattern.search(call) is not None

    def describe(self) -> JSON:
        return {"id": self.id, **self.spec.model_dump(), "fired": self.fired, "remaining": self.remaining}


@dataclass(frozen=True)
class Plan:
    """What to do to one call: wait ``latency_ms``, then apply ``fault`` (a status, hang or drop) if any."""

    latency_ms: int = 0
    fault: Fault | None = None
    fired: tuple[str, ...] = ()


class Faults:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._faults: dict[str, Fault] = {}
        self._rng = rng or random.Random()

    def add(self, spec: FaultSpec) -> Fault:
        fault = Fault(spec)
        self._faults[fault.id] = fault
        return fault

    def remove(self, fault_id: str) -> bool:
        return self._faults.pop(fault_id, None) is not None

    def clear(self) -> None:
        self._faults.clear()

    def list(self) -> list[Fault]:
        return list(self._faults.values())

    def plan(self, method: str, path: str) -> Plan:
        if not self._faults:
            return Plan()
        call = f"{method} {path}"
        latency = 0
        terminal: Fault | None = None
        fired: list[str] = []
        for fault in self._faults.values():
            if not fault.matches(call):
                continue
            if fault.spec.kind != "latency" and terminal is not None:
                continue
            if fault.spec.probability < 1.0 and self._rng.random() >= fault.spec.probability:
                continue
            fault.fired += 1
            fired.append(fault.id)
            if fault.spec.kind == "latency":
                latency += fault.spec.latency_ms or 0
            else:
                terminal = fault
        return Plan(latency, terminal, tuple(fired))
