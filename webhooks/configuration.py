"""The ValidatingWebhookConfiguration of the webhooks, generated from the models: one webhook per kind, as the
chart's `webhook.yaml` renders it (a chart test holds the two together), for callers that register the webhooks
themselves (`kflare dev`, the tests) and say how the API server reaches them (`client_config`)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypedDict

from typing_extensions import Unpack

from app.api import GROUP, KINDS, VERSION, ResourceClass
from app.api.constants import KFLARE_ANNOTATIONS, PAUSED_ANNOTATION
from app.api.registry import CLAIM_LABELS


class MatchCondition(TypedDict):
    name: str
    expression: str
    """CEL over `object`, `oldObject` and `request`: the webhook is called only when it holds."""


class ServiceReference(TypedDict, total=False):
    namespace: str
    name: str
    path: str
    port: int


class WebhookClientConfig(TypedDict, total=False):
    """How the API server reaches a webhook: a `url`, or a `service` of the cluster; `caBundle` to trust."""

    url: str
    service: ServiceReference
    caBundle: str


class RuleWithOperations(TypedDict):
    apiGroups: list[str]
    apiVersions: list[str]
    operations: list[str]
    resources: list[str]
    scope: str


class ValidatingWebhook(TypedDict):
    name: str
    admissionReviewVersions: list[str]
    sideEffects: str
    failurePolicy: str
    timeoutSeconds: int
    matchPolicy: str
    clientConfig: WebhookClientConfig
    rules: list[RuleWithOperations]
    matchConditions: list[MatchCondition]


class ConfigurationMetadata(TypedDict, total=False):
    name: str
    labels: dict[str, str]


class WebhookOptions(TypedDict, total=False):
    """What `configuration` passes on to `webhook` for every kind."""

    failure_policy: str
    timeout_seconds: int
    match_conditions: Sequence[MatchCondition]


def _field(obj: str, path: str) -> str:
    return f"(has({obj}.{path}) ? {obj}.{path} : {{}})"


def _any_differs(path: str, keys: Iterable[str]) -> str:
    """Whether any of `keys` in `path` (labels, annotations) differs between the object and the old one (a key
    absent on one side, present on the other, differs)."""
    new, old = _field("object", path), _field("oldObject", path)
    listed = ", ".join(f"'{key}'" for key in sorted(keys))
    return f"[{listed}].exists(k, (k in {new} ? {new}[k] : '') != (k in {old} ? {old}[k] : ''))"


NOT_BEING_DELETED: Final[MatchCondition] = {
    "name": "not-being-deleted",
    "expression": " || ".join(
        [
            "!has(object.metadata.deletionTimestamp)",
            _any_differs("metadata.labels", CLAIM_LABELS),
            _any_differs("metadata.annotations", KFLARE_ANNOTATIONS),
        ]
    ),
}
"""Never in the way of an object being deleted (removing a finalizer by hand must work while no webhook answers),
unless the change sets or changes what only kflare writes (a claim label, the create intent, the adopted mark): a
resource held in deletion by its finalizer would otherwise take a forged claim past the webhook, and its deletion
would delete the object the claim names."""


def _ours_changed(new: str, old: str) -> str:
    """One of kflare's annotations but the pause (adoption and deletion policy...) in `new` that `old` lacks or
    holds another value of."""
    a, b = _field(new, "metadata.annotations"), _field(old, "metadata.annotations")
    return f"{a}.exists(k, k.startsWith('{GROUP}/') && k != '{PAUSED_ANNOTATION}' && !(k in {b} && {b}[k] == {a}[k]))"


NOT_ONLY_PAUSED_OR_FOREIGN_ANNOTATIONS: Final[MatchCondition] = {
    "name": "not-only-paused-or-foreign-annotations",
    "expression": " || ".join(
        [
            "request.operation != 'UPDATE'",
            f"{_field('object', 'spec')} != {_field('oldObject', 'spec')}",
            f"{_field('object', 'metadata.labels')} != {_field('oldObject', 'metadata.labels')}",
            _ours_changed("object", "oldObject"),
            _ours_changed("oldObject", "object"),
        ]
    ),
}
"""Pausing, unpausing and annotations of other tools need no webhook, so they work while no kflare pod serves (a
crash loop, a rollout gone wrong): the first thing an operator does in an incident is `kflare.dev/paused=true`. The
webhook checks nothing in such a change (the spec, labels and kflare's other annotations are as they were)."""
FAILURE_POLICY: Final = "Fail"
TIMEOUT_SECONDS: Final = 10

ClientConfig = Callable[[ResourceClass], WebhookClientConfig]


def webhook_name(model: ResourceClass) -> str:
    """The name the API server quotes in a denial: `admission webhook "<name>" denied the request: ...`."""
    return f"{model.info.plural}.validate.{GROUP}"


def url_client_config(base_url: str, ca_pem: bytes) -> ClientConfig:
    """Reach the webhooks at `base_url` (`https://127.0.0.1:9443`), trusting `ca_pem`."""
    bundle = base64.b64encode(ca_pem).decode()

    def client_config(model: ResourceClass) -> WebhookClientConfig:
        return {"url": f"{base_url.rstrip('/')}/validate/{model.info.plural}", "caBundle": bundle}

    return client_config


def webhook(
    model: ResourceClass,
    client_config: ClientConfig,
    *,
    failure_policy: str = FAILURE_POLICY,
    timeout_seconds: int = TIMEOUT_SECONDS,
    match_conditions: Sequence[MatchCondition] = (),
) -> ValidatingWebhook:
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
        "matchConditions": [NOT_BEING_DELETED, NOT_ONLY_PAUSED_OR_FOREIGN_ANNOTATIONS, *match_conditions],
    }


def configuration(
    name: str,
    client_config: ClientConfig,
    *,
    kinds: Iterable[ResourceClass] = KINDS,
    labels: dict[str, str] | None = None,
    **options: Unpack[WebhookOptions],
) -> dict[str, str | ConfigurationMetadata | list[ValidatingWebhook]]:
    """The whole `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration, cluster-scoped kinds first."""
    ordered = sorted(kinds, key=lambda model: model.info.namespaced)
    metadata: ConfigurationMetadata = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [webhook(model, client_config, **options) for model in ordered],
    }
