"""Fuzz the listeners (probes, webhooks, metrics) from their checked-in OpenAPI documents, in process: whatever
arrives, they answer without a server error."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup

from app.metrics import create_app as metrics_app
from app.openapi import DEFAULT_DIRECTORY
from app.server import Runtime, probes_app
from app.settings import Settings
from webhooks.app import create_app as webhooks_app

EXAMPLES = 40
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


class HealthyRuntime(Runtime):
    """A runtime whose loop ticks and whose caches synced: the probes' 500 and 503 are their answers when the
    process is unwell, which is not what this test is about."""

    healthy = True  # type: ignore[assignment]
    ready = True  # type: ignore[assignment]


def _schema(name: str, app: Any) -> Any:
    schema = schemathesis.openapi.from_path(DEFAULT_DIRECTORY / f"{name}.json")
    schema.app = app
    return schema


probes = _schema("probes", probes_app(HealthyRuntime(Settings.model_construct())))
webhooks = _schema("webhooks", webhooks_app(body_timeout=2.0))
metrics = _schema("metrics", metrics_app(None))


@probes.parametrize()
@FUZZ
def test_probes_never_answer_a_server_error(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])


@webhooks.parametrize()
@FUZZ
def test_webhooks_never_answer_a_server_error(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])


@metrics.parametrize()
@FUZZ
def test_metrics_never_answer_a_server_error(case: Any) -> None:
    case.call_and_validate(checks=[not_a_server_error])


def test_a_real_probe_failure_is_still_a_server_error() -> None:
    """The check above is not vacuous: an unhealthy process does answer 500."""
    schema = _schema("probes", probes_app(Runtime(Settings.model_construct())))
    operation = schema["/healthz"]["GET"]
    response = operation.Case().call()
    assert response.status_code == 500
    with pytest.raises(FailureGroup):
        operation.Case().call_and_validate(checks=[not_a_server_error])
