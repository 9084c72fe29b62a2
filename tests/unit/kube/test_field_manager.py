"""Every write kflare makes names its field manager: the webhook lets only those set the claim labels."""

from __future__ import annotations

import ssl

import httpx
import respx

from app.kube.client import CONFIGMAPS, KubeClient
from app.kube.identity import FIELD_MANAGER


async def test_creates_replaces_and_patches_name_kflare_as_field_manager() -> None:
    kube = KubeClient("https://kube.test", ssl.create_default_context())
    seen: list[tuple[str, str | None]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.params.get("fieldManager")))
        return httpx.Response(200, json={})

    try:
        with respx.mock(base_url="https://kube.test") as mock:
            mock.route().mock(side_effect=answer)
            body = {"metadata": {"name": "c"}}
            await kube.create(CONFIGMAPS, body, "ns")
            await kube.replace(CONFIGMAPS, body, "ns")
            await kube.patch(CONFIGMAPS, "c", {"metadata": {"labels": {"a": "b"}}}, "ns")
            await kube.patch(CONFIGMAPS, "c", {"status": {}}, "ns", subresource="status")
            await kube.get(CONFIGMAPS, "c", "ns")
    finally:
        await kube.close()
    assert seen == [
        ("POST", FIELD_MANAGER),
        ("PUT", FIELD_MANAGER),
        ("PATCH", FIELD_MANAGER),
        ("PATCH", FIELD_MANAGER),
        ("GET", None),
    ]
