"""The ValidatingWebhookConfiguration of the webhooks, generated from the models: one webhook per kind, as the
chart's `webhook.yaml` renders it (a chart test holds the two together), for callers that register the webhooks
themselves (`kflare dev`, the tests) and say how the API server reaches them (`client_config`)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from app.api import GROUP, KINDS, VERSION, ResourceClass

NOT_BEING_DELETED: Final = {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"}
"""Never in the way of an object being deleted: removing a finalizer by hand must work while no webhook answers."""
FAILURE_POLICY: Final = "Fail"
TIMEOUT_SECONDS: Final = 10

ClientConfig = Callable[[ResourceClass], dict[str, Any]]


def webhook_name(model: ResourceClass) -> str:
    """The name the API server quotes in a denial: `admission webhook "<name>" denied the request: ...`."""
    return f"{model.info.plural}.validate.{GROUP}"


def url_client_config(base_url: str, ca_pem: bytes) -> ClientConfig:
    """Reach the webhooks at `base_url` (`https://127.0.0.1:9443`), trusting `ca_pem`."""
    bundle = base64.b64encode(ca_pem).decode()

    def client_config(model: ResourceClass) -> dict[str, Any]:
        return {"url": f"{base_url.rstrip('/')}/validate/{model.info.plural}", "caBundle": bundle}

    return client_config


def webhook(
    model: ResourceClass,
    client_config: ClientConfig,
    *,
    failure_policy: str = FAILURE_POLICY,
    timeout_seconds: int = TIMEOUT_SECONDS,
    match_conditions: Sequence[dict[str, str]] = (),
) -> dict[str, Any]:
    """The webhook validating one kind on CREATE and UPDATE at `/validate/<plural>`."""
    return {
        "name": webhook_name(model),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": failure_policy,
        "timeoutSeconds": timeout_seconds,
        "matchPolicy": "Equivalent",
        "clientConfig": client_config(model),
        "rules": [
            {
                "apiGroups": [GROUP],
                "apiVersions": [VERSION],
                "operations": ["CREATE", "UPDATE"],
                "resources": [model.info.plural],
                "scope": model.info.scope,
            }
        ],
        "matchConditions": [NOT_BEING_DELETED, *match_conditions],
    }


def configuration(
    name: str,
    client_config: ClientConfig,
    *,
    kinds: Iterable[ResourceClass] = KINDS,
    labels: dict[str, str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The whole `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration, cluster-scoped kinds first."""
    ordered = sorted(kinds, key=lambda model: model.info.namespaced)
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [webhook(model, client_config, **options) for model in ordered],
    }
