"""A Gateway's own plane has a Service with the Gateway's listener ports, for clients reaching the Gateway directly:
HTTP ports to Envoy's plaintext listener, HTTPS ones to the listener serving the Gateway's certificates."""

from __future__ import annotations

import dataclasses
from typing import Any

from reconcilers.gateway.data_planes import _gateway_state
from reconcilers.gateway.plane_manifests import SERVICES, owned_names, plane_objects
from reconcilers.gateway.planes import Plane, PlaneSettings, choose
from tests.dataplane.world import CLASS_NAME, NS, gateway, meta

SETTINGS = PlaneSettings(
    namespace="kflare-system",
    xds_secret="kflare-xds",
    origin_secret="kflare-origin-tls",
    envoy_image="envoy",
    cloudflared_image="cloudflared",
)
PARAMS = {"kind": "GatewayParameters", "metadata": meta("own"), "spec": {"accountRef": {"name": "acct"}}}
LISTENERS: list[dict[str, Any]] = [
    {"name": "http", "protocol": "HTTP", "port": 80},
    {"name": "alt", "protocol": "HTTP", "port": 8080},
    {
        "name": "https",
        "protocol": "HTTPS",
        "port": 443,
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": "c"}]},
    },
    {"name": "other", "protocol": "HTTPS", "port": 443, "hostname": "b.example.org", "tls": {"certificateRefs": []}},
    {"name": "passthrough", "protocol": "TLS", "port": 8443, "tls": {"mode": "Passthrough"}},
]


def own_plane(listeners: list[dict[str, Any]] = LISTENERS) -> tuple[dict[str, Any], Plane]:
    gw = gateway("edge", listeners)
    gw["metadata"]["uid"] = "uid-edge"
    gw["spec"]["infrastructure"] = {
        "parametersRef": {"group": "kflare.dev", "kind": "GatewayParameters", "name": "own"}
    }
    plane = choose([gw], [PARAMS], {CLASS_NAME}, cap=1)[(NS, "edge")]
    assert isinstance(plane, Plane)
    return gw, plane


def objects(listeners: list[dict[str, Any]] = LISTENERS, settings: PlaneSettings = SETTINGS) -> dict[str, Any]:
    gw, plane = own_plane(listeners)
    return {body["kind"]: body for _, body in plane_objects(plane, settings, {}, {}, gw["spec"]["listeners"])}


def test_the_service_has_one_port_per_listener_port_on_the_planes_pods() -> None:
    made = objects()
    service = made["Service"]
    assert service["metadata"]["name"] == "kflare-gw-edge"
    assert service["metadata"]["namespace"] == NS
    assert service["spec"]["type"] == "ClusterIP"
    pod_labels = made["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["ports"] == [
        {"name": "http-80", "port": 80, "targetPort": "http", "protocol": "TCP"},
        {"name": "http-8080", "port": 8080, "targetPort": "http", "protocol": "TCP"},
        {"name": "https-443", "port": 443, "targetPort": "gateway-https", "protocol": "TCP"},
    ]
    envoy = made["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    named = {p["name"]: p["containerPort"] for p in envoy["ports"]}
    assert (named["http"], named["gateway-https"]) == (SETTINGS.port, SETTINGS.https_port)


def test_every_plane_object_and_its_pods_carry_the_gateway_name_label() -> None:
    made = objects()
    for body in made.values():
        assert body["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"] == "edge"
    template = made["Deployment"]["spec"]["template"]["metadata"]
    assert template["labels"]["gateway.networking.k8s.io/gateway-name"] == "edge"


def test_without_the_https_listener_or_any_served_port_the_service_says_so() -> None:
    off = dataclasses.replace(SETTINGS, https_port=None)
    assert [p["port"] for p in objects(settings=off)["Service"]["spec"]["ports"]] == [80, 8080]
    envoy = objects(settings=off)["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert "gateway-https" not in [p["name"] for p in envoy["ports"]]
    # A Gateway with no HTTP or HTTPS listener has nothing to serve there: no Service (one with no port is invalid).
    assert "Service" not in objects([LISTENERS[-1]])


def test_the_service_follows_the_listeners_and_goes_with_the_plane() -> None:
    gw, _ = own_plane()
    changed = {**gw, "spec": {**gw["spec"], "listeners": [*LISTENERS, {"name": "x", "protocol": "HTTP", "port": 81}]}}
    # A change of the listeners reconciles the plane again (what the reconcile watches of a Gateway).
    assert _gateway_state(gw) != _gateway_state(changed)
    assert (SERVICES, "kflare-gw-edge") in owned_names("kflare-gw-edge")
