"""Fuzz the listeners (probes, webhooks, metrics) from their checked-in OpenAPI documents, in process: whatever
arrives, they answer without a server error."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from app.metrics.listener import create_app as metrics_app
from app.openapi import DEFAULT_DIRECTORY
from app.server import LOOP_STALL, Runtime, probes_app
from app.settings import Settings
from webhooks.app import create_app as webhooks_app

pytestmark = pytest.mark.heavy

EXAMPLES = 40
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@dataclass
class ManagerState:
    """What the probes read of the manager."""

    alive: bool
    ready: bool


@dataclass(frozen=True)
class State:
    """A process in one state: its manager (absent while starting), and whether its event loop ticks."""

    manager: ManagerState | None
    ticking: bool

    @property
    def healthy(self) -> bool:
        return self.ticking and self.manager is not None and self.manager.alive

    @property
    def ready(self) -> bool:
        return self.manager is not None and self.manager.ready


STATES = [State(None, True)] + [
    State(ManagerState(alive, ready), ticking)
    for alive in (True, False)
    for ready in (True, False)
    for ticking in (True, False)
]
runtime = Runtime(Settings.model_construct())


def enter(state: State) -> None:
    runtime.manager = state.manager  # type: ignore[assignment]
    # A ticking loop ticked just now (its ticker runs every second); a stalled one last ticked long ago.
    runtime.last_tick = time.monotonic() - (0.0 if state.ticking else 2 * LOOP_STALL)


def _schema(name: str, app: Any) -> Any:
    schema = schemathesis.openapi.from_path(DEFAULT_DIRECTORY / f"{name}.json")
    schema.app = app
    return schema


probes = _schema("probes", probes_app(runtime))
webhooks = _schema("webhooks", webhooks_app(body_timeout=2.0))
metrics = _schema("metrics", metrics_app(None))


@pytest.mark.parametrize("state", STATES, ids=repr)
@probes.parametrize()
@FUZZ
def test_probes_answer_the_process_state_whatever_arrives(case: Any, state: State) -> None:
    """Healthy: 200, else 500; ready: 200, else 503, whatever the GET carries; other methods are refused."""
    enter(state)
    response = case.call()
    if case.method.upper() != "GET":
        assert response.status_code == 405
    elif case.path == "/healthz":
        assert (response.status_code, response.text) == ((200, "ok") if state.healthy else (500, "unhealthy"))
    else:
        assert (response.status_code, response.text) == ((200, "ok") if state.ready else (503, "not ready"))


@webhooks.parametrize()
@FUZZ
def test_webhooks_never_answer_a_server_error(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])


@metrics.parametrize()
@FUZZ
def test_metrics_never_answer_a_server_error(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])
