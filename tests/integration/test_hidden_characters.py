"""The CRDs refuse control characters and bidirectional overrides by themselves (no webhook registered), in every
string of every kind, naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from tests.unit.api.test_text import FULL, _get, _set, _strings
from tests.unit.webhooks.reviews import model_named, sample

pytestmark = pytest.mark.integration


async def _dry_run(api: ApiClient, namespace: str, obj: dict[str, Any]) -> ApiException | None:
    objects = client.CustomObjectsApi(api)
    info = model_named(obj["kind"]).info
    try:
        if info.namespaced:
            await objects.create_namespaced_custom_object(
                "kflare.dev", "v1alpha1", namespace, info.plural, obj, dry_run="All"
            )
        else:
            await objects.create_cluster_custom_object("kflare.dev", "v1alpha1", info.plural, obj, dry_run="All")
    except ApiException as exc:
        return exc
    return None


async def test_the_crds_refuse_hidden_characters_in_every_string(
    kube: ApiClient, namespace: str, kflare_crds: None
) -> None:
    for kind in ("CloudflareAccount", "Zone", "DNSRecord"):
        base = sample(kind, **FULL.get(kind, {}))
        base["metadata"] = {"name": "hidden", "namespace": namespace}
        plain = await _dry_run(kube, namespace, copy.deepcopy(base))
        assert plain is None, f"{kind} as it is refused: {plain.status} {plain.body}"  # the object itself is fine
        for path in _strings(base["spec"], "spec"):
            for char in ("\x00", "\u202e", "\u2066"):
                obj = copy.deepcopy(base)
                value = _get(obj, path)
                _set(obj, path, value[:1] + char + value[1:])
                refused = await _dry_run(kube, namespace, obj)
                assert refused is not None, f"{kind} {path} took {char!r}"
                assert refused.status == 422, refused.body
                assert path.split("[")[0] in refused.body, refused.body
                if path == "spec.name" and kind == "DNSRecord":
                    assert "must not contain control or invisible formatting characters" in refused.body
