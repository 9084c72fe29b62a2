"""The test control plane is a real Kubernetes API server: schemas, CEL, watches, finalizers, authn and authz."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.controlplane import ControlPlane
from app.kube.client import IN_FLIGHT, NAMESPACES, KubeClient
from tests.fixtures.kube import api_client_for, metrics_reader, service_account_token, user_kubeconfig
from tests.helpers import eventually

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "test.kflare.dev", "v1", "widgets"
MERGE = "application/merge-patch+json"  # custom resources take no strategic merge patch


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                    "zone": {"type": "string", "maxLength": 253},
                                },
                                "x-kubernetes-validations": [
                                    {"rule": "self.zone == oldSelf.zone", "message": "zone is immutable"}
                                ],
                            },
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
async def widgets(kube: ApiClient) -> client.CustomObjectsApi:
    ext = client.ApiextensionsV1Api(kube)
    try:
        await ext.create_custom_resource_definition(WIDGET_CRD)
    except ApiException as exc:
        if exc.status != 409:  # another test of this session installed it
            raise

    async def established() -> bool:
        crd = await ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

    await eventually(established, what="CRD Established")
    api = client.CustomObjectsApi(kube)

    async def served() -> bool:
        # Right after Established the watch cache may still answer 429 "storage is (re)initializing".
        await api.list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=1)
        return True

    await eventually(served, what="CRD served from the watch cache")
    return api


def widget(name: str, size: int, zone: str = "example.com") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, "zone": zone},
    }


async def test_schema_and_cel_rules_are_enforced(widgets: client.CustomObjectsApi, namespace: str) -> None:
    with pytest.raises(ApiException) as refused:
        await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("big", 11))
    assert refused.value.status == 422
    assert "spec.size" in refused.value.body
    assert "less than or equal to 10" in refused.value.body

    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("w", 3))
    with pytest.raises(ApiException) as immutable:
        await widgets.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "w", {"spec": {"zone": "other.example"}}, _content_type=MERGE
        )
    assert immutable.value.status == 422
    assert "zone is immutable" in immutable.value.body
    # A change the rules allow goes through.
    patched = await widgets.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "w", {"spec": {"size": 4}}, _content_type=MERGE
    )
    assert patched["spec"]["size"] == 4


async def test_watch_sees_events_in_order_with_bookmarks(widgets: client.CustomObjectsApi, namespace: str) -> None:
    listing = await widgets.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    start_rv = listing["metadata"]["resourceVersion"]
    seen: list[tuple[str, str, int | None]] = []
    bookmarks: list[str] = []

    async def consume() -> None:
        w = watch.Watch()
        async with w.stream(
            widgets.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            resource_version=start_rv,
            allow_watch_bookmarks=True,
            timeout_seconds=6,
        ) as stream:
            async for event in stream:
                obj = event["object"]
                if event["type"] == "BOOKMARK":
                    bookmarks.append(obj["metadata"]["resourceVersion"])
                else:
                    seen.append((event["type"], obj["metadata"]["name"], obj["spec"].get("size")))
                if len(seen) >= 4 and bookmarks:
                    return

    consumer = asyncio.create_task(consume())
    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("a", 1))
    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, widget("b", 2))
    await widgets.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "a", {"spec": {"size": 5}}, _content_type=MERGE
    )
    await widgets.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "b")
    try:
        await asyncio.wait_for(consumer, timeout=60)
    finally:
        consumer.cancel()
    assert seen == [("ADDED", "a", 1), ("ADDED", "b", 2), ("MODIFIED", "a", 5), ("DELETED", "b", 2)]
    assert bookmarks, "the API server sent no bookmark"
    assert int(bookmarks[-1]) >= int(start_rv)


async def test_finalizer_holds_deletion_until_removed(widgets: client.CustomObjectsApi, namespace: str) -> None:
    obj = widget("held", 1)
    obj["metadata"]["finalizers"] = ["kflare.dev/finalizer"]
    await widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, obj)
    await widgets.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
    held = await widgets.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["kflare.dev/finalizer"]

    await widgets.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "held", [{"op": "remove", "path": "/metadata/finalizers"}]
    )

    async def gone() -> bool:
        try:
            await widgets.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "held")
        except ApiException as exc:
            return exc.status == 404
        return False

    await eventually(gone, what="object deleted once its finalizer is removed")


async def test_service_account_token_review_and_access_review(kube: ApiClient, namespace: str) -> None:
    token = await service_account_token(kube, namespace, "scraper")
    review = await client.AuthenticationV1Api(kube).create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    )
    assert review.status.authenticated is True
    user = review.status.user
    assert user.username == f"system:serviceaccount:{namespace}:scraper"

    async def may_get_metrics() -> bool:
        sar = await client.AuthorizationV1Api(kube).create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=user.username,
                    groups=user.groups,
                    non_resource_attributes=client.V1NonResourceAttributes(path="/metrics", verb="get"),
                )
            )
        )
        return bool(sar.status.allowed)

    assert await may_get_metrics() is False
    async with metrics_reader(kube, namespace, "scraper"):  # waits until the authorizer agrees
        assert await may_get_metrics() is True


async def test_unprivileged_user_is_forbidden(control_plane: ControlPlane, namespace: str) -> None:
    api = await api_client_for(user_kubeconfig(control_plane, f"nobody-{uuid.uuid4().hex[:6]}"))
    try:
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(api).list_namespaced_secret(namespace)
        assert denied.value.status == 403
    finally:
        await api.close()


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{argv[0]} failed: {done.stderr}"
    return done.stdout


def test_kubectl_and_helm_talk_to_the_server(control_plane: ControlPlane) -> None:
    kubeconfig = str(control_plane.kubeconfig_path)
    versions = json.loads(
        _run(str(control_plane.binary("kubectl")), "--kubeconfig", kubeconfig, "version", "-o", "json")
    )
    assert versions["serverVersion"]["gitVersion"].startswith("v1.34.")
    assert versions["serverVersion"]["minor"] == "34"
    namespaces = _run(str(control_plane.binary("kubectl")), "--kubeconfig", kubeconfig, "get", "ns", "-o", "name")
    assert "namespace/kube-system" in namespaces
    helm = _run(str(control_plane.binary("helm")), "version", "--short")
    assert helm.startswith("v3.")
    releases = _run(str(control_plane.binary("helm")), "--kubeconfig", kubeconfig, "list", "-A", "-o", "json")
    assert json.loads(releases) == []


async def test_kflares_requests_share_one_http2_connection_and_its_watches_their_own(
    control_plane: ControlPlane, namespace: str
) -> None:
    """kflare's client sends its requests as HTTP/2 streams of one connection: with a connection per request in
    flight, its pool's bookkeeping on each answer took most of the controller's CPU in a bulk apply. Watches keep
    their own HTTP/1.1 connections."""
    kube = await KubeClient.connect(control_plane.kubeconfig_path)
    try:
        answers = await asyncio.gather(*(kube.get(NAMESPACES, namespace) for _ in range(3 * IN_FLIGHT)))
        assert {a["metadata"]["name"] for a in answers} == {namespace}
        connections = kube.http._transport._pool.connections  # type: ignore[attr-defined]
        assert len(connections) == 1
        assert "HTTP/2" in connections[0].info()
        events = kube.watch(NAMESPACES, resource_version="0", timeout_seconds=1)
        assert (await anext(events))["type"] in {"ADDED", "BOOKMARK"}
        await events.aclose()  # type: ignore[attr-defined]
        assert len(kube.http._transport._pool.connections) == 1  # type: ignore[attr-defined]
    finally:
        await kube.close()
