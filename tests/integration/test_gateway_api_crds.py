"""The Gateway API CRDs the class is built against install into the test API server."""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from reconcilers.gateway.kinds import BUNDLE_VERSION, BUNDLE_VERSION_ANNOTATION


async def test_standard_channel_installed_at_the_pinned_bundle(kube: ApiClient, gateway_api: Path) -> None:
    crd = await client.ApiextensionsV1Api(kube).read_custom_resource_definition("httproutes.gateway.networking.k8s.io")
    assert crd.metadata.annotations[BUNDLE_VERSION_ANNOTATION] == BUNDLE_VERSION
    assert crd.metadata.annotations["gateway.networking.k8s.io/channel"] == "standard"
