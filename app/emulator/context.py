"""The emulator's mutable world in one object, reachable from every route as a FastAPI dependency."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request
from pydantic import JsonValue

from app.emulator.calls import CallLog
from app.emulator.envelope import JSON
from app.emulator.faults import Faults
from app.emulator.ratelimit import Limits, RateLimiter
from app.emulator.seed import DEFAULT_STATE, apply_seed, dump_state
from app.emulator.state import Store

if TYPE_CHECKING:
    from app.emulator.collection import Kind


class Emulator:
    def __init__(self, limits: Limits, kinds: Sequence[Kind]) -> None:
        self.store = Store(kinds)
        self.limiter = RateLimiter(limits)
        self.faults = Faults()
        self.calls = CallLog()
        self._startup_limits = limits
        self._baseline: JSON = {}
        self.bootstrap: JSON = {}
        self.defaults: dict[str, int] = {name: value for kind in kinds for name, value in kind.options.items()}
        self.options: dict[str, int] = dict(self.defaults)

    def boot(self, state: Mapping[str, JsonValue] | None) -> JSON:
        """Seed the starting state (the default account and token without one); ``reset`` comes back to it."""
        created = apply_seed(self.store, state if state is not None else DEFAULT_STATE)
        self._baseline = dump_state(self.store)
        first_account = created["accounts"][0]["id"] if created["accounts"] else None
        first_token = created["tokens"][0] if created["tokens"] else None
        self.bootstrap = {
            "account_id": first_account,
            "token": first_token["value"] if first_token else None,
            "token_id": first_token["id"] if first_token else None,
            "accounts": list(created["accounts"]),
            "tokens": list(created["tokens"]),
        }
        return self.bootstrap

    def reset(self) -> None:
        """Back to the starting state: same objects, IDs and token values; no faults, no calls, fresh limits, the
        default options."""
        self.store.clear()
        apply_seed(self.store, self._baseline)
        self.limiter.configure(self._startup_limits)
        self.faults.clear()
        self.calls.clear()
        self.options = dict(self.defaults)


def emulator_of(request: Request) -> Emulator:
    emulator = getattr(request.app, "emulator", None)
    if not isinstance(emulator, Emulator):
        raise RuntimeError("the app was not built by app.emulator.create_app")
    return emulator


async def _emulator_dependency(request: Request) -> Emulator:
    # A coroutine, so FastAPI calls it on the event loop that owns the store rather than in its thread pool.
    return emulator_of(request)


EmulatorDep = Annotated[Emulator, Depends(_emulator_dependency)]
