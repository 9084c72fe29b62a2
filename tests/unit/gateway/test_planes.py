"""A Gateway's own data plane without an API server: who gets one (the cap, oldest first; refusals a user can act
on), what it is made of (names, labels and annotations propagated, the owner, nothing of the xDS token), and how
the translation splits the configuration between the shared plane and each Gateway's own."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

from reconcilers.gateway.data_planes import connector_tunnel
from reconcilers.gateway.gateway_configs import class_accounts
from reconcilers.gateway.kinds import CONTROLLER_NAME, Classes
from reconcilers.gateway.plane_manifests import adopting_tunnel_object, plane_objects, tunnel_object
from reconcilers.gateway.planes import Plane, PlanePolicy, PlaneSettings, choose, plane_name
from reconcilers.gateway.translate import TunnelState, translate
from tests.dataplane.world import CLASS_NAME, NS, backend, gateway, gateway_class, http_route, meta, world

OWN = {"group": "kflare.dev", "kind": "GatewayParameters", "name": "own"}
PARAMS = {
    "kind": "GatewayParameters",
    "metadata": meta("own"),
    "spec": {"accountRef": {"name": "acct"}, "tunnelName": "edge", "replicas": 3},
}
SETTINGS = PlaneSettings(
    namespace="kflare-system",
    xds_secret="kflare-xds",
    origin_secret="kflare-origin-tls",
    envoy_image="envoy@sha256:" + "e" * 64,
    cloudflared_image="cloudflared@sha256:" + "c" * 64,
)


def asking(name: str, created: str = "2026-01-01T00:00:00Z", ref: dict[str, Any] | None = None, **infra: Any) -> Any:
    out = gateway(name)
    out["metadata"] = meta(name, created=created, uid=f"uid-{name}")
    out["spec"]["infrastructure"] = {"parametersRef": ref or OWN, **infra}
    return out


def test_the_oldest_gateways_of_a_namespace_get_a_plane_up_to_the_cap() -> None:
    gateways = [asking("late", "2026-03-01T00:00:00Z"), asking("early", "2026-01-01T00:00:00Z"), gateway("plain")]
    choices = choose(gateways, [PARAMS], {CLASS_NAME}, cap=1)
    assert isinstance(choices[(NS, "early")], Plane)
    assert "already has 1 Gateway(s)" in str(choices[(NS, "late")])
    assert (NS, "plain") not in choices  # no parametersRef: the shared plane, as before
    # Being deleted: it has no plane any more (it is taken down), and its place goes to the next.
    gateways[1]["metadata"]["deletionTimestamp"] = "2026-04-01T00:00:00Z"
    assert isinstance(choose(gateways, [PARAMS], {CLASS_NAME}, cap=1)[(NS, "late")], Plane)


def test_a_default_gives_a_plane_to_gateways_naming_none_and_falls_back_to_the_shared_one() -> None:
    """With `--gateway-default-parameters`, a Gateway naming no GatewayParameters gets a plane made of the default
    (which lives in its own namespace); beyond the cap, or while the default is missing, the shared plane serves it
    (no refusal); a Gateway naming its own still gets its own, and its refusals as before."""
    default = {**PARAMS, "metadata": meta("platform", namespace="kflare-system")}
    default["spec"] = {**PARAMS["spec"], "replicas": 2}
    gateways = [
        gateway("plain-a") | {"metadata": meta("plain-a", created="2026-01-01T00:00:00Z", uid="uid-a")},
        gateway("plain-b") | {"metadata": meta("plain-b", created="2026-02-01T00:00:00Z", uid="uid-b")},
        asking("named", "2026-03-01T00:00:00Z"),
    ]
    policy = PlanePolicy(cap=2, default=("kflare-system", "platform"))
    choices = choose(gateways, [PARAMS, default], {CLASS_NAME}, policy)
    first = choices[(NS, "plain-a")]
    assert isinstance(first, Plane)
    assert first.parameters["replicas"] == 2
    assert isinstance(choices[(NS, "plain-b")], Plane)
    assert "already has 2 Gateway(s)" in str(choices[(NS, "named")])  # named its own: refused, as without one
    # One more than the cap, naming none: served by the shared plane, not refused.
    late = gateway("plain-c") | {"metadata": meta("plain-c", created="2026-04-01T00:00:00Z", uid="uid-c")}
    assert (NS, "plain-c") not in choose([*gateways, late], [PARAMS, default], {CLASS_NAME}, policy)
    # The default missing: every Gateway naming none is served by the shared plane.
    assert choose(gateways[:2], [PARAMS], {CLASS_NAME}, policy) == {}
    # Without a default, as before: only the Gateway naming its own.
    assert set(choose(gateways, [PARAMS, default], {CLASS_NAME}, cap=2)) == {(NS, "named")}


def test_a_refusal_says_what_to_fix() -> None:
    wrong = asking("wrong", ref={"group": "", "kind": "ConfigMap", "name": "x"})
    missing = asking("missing", ref={**OWN, "name": "absent"})
    choices = choose([wrong, missing], [PARAMS], {CLASS_NAME}, cap=3)
    assert "ConfigMap.core is not a parameters kind of this class; name a GatewayParameters.kflare.dev" in str(
        choices[(NS, "wrong")]
    )
    assert str(choices[(NS, "missing")]).endswith(f"GatewayParameters {NS}/absent not found")
    assert "--gateway-planes-per-namespace=0" in str(choose([asking("a")], [PARAMS], {CLASS_NAME}, cap=0)[(NS, "a")])
    # A Tunnel of the plane's name that is someone else's is never taken over.
    taken = choose([asking("a")], [PARAMS], {CLASS_NAME}, cap=3, tunnel=lambda ns, name: {"metadata": meta(name)})
    assert "exists and is not this Gateway's" in str(taken[(NS, "a")])
    # Another controller's Gateways are not this one's to give planes to.
    assert choose([asking("a")], [PARAMS], {"other-class"}, cap=3) == {}


def test_names_fit_kubernetes_limits() -> None:
    assert plane_name("edge") == "kflare-gw-edge"
    long = plane_name("g" * 63)
    assert len(long) <= 52
    assert long != plane_name("g" * 62 + "h")


def test_the_plane_objects_carry_the_gateways_infrastructure_and_owner() -> None:
    (gw,) = [asking("edge", labels={"team": "a"}, annotations={"example.com/x": "y"})]
    plane = choose([gw], [PARAMS], {CLASS_NAME}, cap=1)[(NS, "edge")]
    assert isinstance(plane, Plane)
    xds = {"bootstrap.json": "Yg==", "ca.crt": "Yw==", "client.crt": "ZA==", "client.key": "ZQ=="}
    objects = plane_objects(plane, SETTINGS, xds, {"ca.crt": "", "tls.crt": "", "tls.key": ""})
    kinds = [body["kind"] for _, body in objects]
    assert kinds == ["ServiceAccount", "Secret", "Secret", "Deployment", "PodDisruptionBudget"]
    for _, body in [*objects, (None, tunnel_object(plane, SETTINGS))]:
        labels = body["metadata"]["labels"]
        assert (labels["team"], labels["kflare.dev/gateway"]) == ("a", "edge")
        assert labels["gateway.networking.k8s.io/gateway-name"] == "edge"
        assert body["metadata"]["annotations"]["example.com/x"] == "y"
        assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-edge"
    deployment = objects[3][1]
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "a"
    envoy, cloudflared = pod["spec"]["containers"]
    assert envoy["image"] == SETTINGS.envoy_image
    assert "kflare-gateway/apps/edge" in envoy["args"]
    assert cloudflared["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "kflare-gw-edge-tunnel-token"
    # cloudflared's diagnostics on loopback; the pod's port 2000 is the bootstrap's listener on Envoy, as the chart's.
    assert cloudflared["args"][cloudflared["args"].index("--metrics") + 1] == "127.0.0.1:20000"
    assert "ports" not in cloudflared
    assert cloudflared["readinessProbe"]["httpGet"]["port"] == 2000
    assert {"name": "cf-metrics", "containerPort": 2000, "protocol": "TCP"} in envoy["ports"]
    assert "token" not in objects[1][1]["data"]
    tunnel = tunnel_object(plane, SETTINGS)
    assert tunnel["spec"]["name"] == f"edge-{NS}-edge"
    assert tunnel["metadata"]["annotations"]["kflare.dev/deletion-policy"] == "delete"


def test_the_translation_serves_a_gateways_routes_on_its_own_plane_only() -> None:
    own, shared = asking("own"), gateway("edge")
    routes = [
        http_route("mine", ["mine.example.com"], [{"backendRefs": [backend("alpha")]}], parents=[{"name": "own"}]),
        http_route("theirs", ["theirs.example.com"], [{"backendRefs": [backend("beta")]}]),
    ]
    choices = choose([own, shared], [PARAMS], {CLASS_NAME}, cap=1)
    ready = TunnelState(True, "", "id.cfargotunnel.com")
    result = translate(world(routes, {"alpha": 8001, "beta": 8002}, gateways=[own, shared], planes=choices))
    plane = choices[(NS, "own")]
    assert isinstance(plane, Plane)

    def hosts(resources: dict[str, list[Any]]) -> list[str]:
        return [vh["name"] for vh in resources["routes"][0]["virtual_hosts"]]

    def clusters(resources: dict[str, list[Any]]) -> list[str]:
        return [c["name"] for c in resources["clusters"]]

    assert hosts(result.planes[plane.cluster]) == ["mine.example.com"]
    assert hosts(result.resources) == ["theirs.example.com"]
    assert all("alpha" in c for c in clusters(result.planes[plane.cluster]))
    assert clusters(result.planes[plane.cluster])
    (mine,) = [h for h in result.hostnames if h.hostname == "mine.example.com"]
    assert mine.tunnel == plane.tunnel_key
    # Until its tunnel exists the Gateway is not Programmed, and says why.
    programmed = next(c for c in result.gateway_status[(NS, "own")]["conditions"] if c["type"] == "Programmed")
    assert (programmed["status"], programmed["reason"]) == ("False", "Pending")
    assert "kflare-gw-own" in programmed["message"]
    tunnels = {plane.tunnel_key: ready}
    result = translate(
        world(
            routes,
            {"alpha": 8001, "beta": 8002},
            gateways=[own, shared],
            planes=choices,
            tunnel=lambda ns, name: tunnels.get((ns, name)),
        )
    )
    programmed = next(c for c in result.gateway_status[(NS, "own")]["conditions"] if c["type"] == "Programmed")
    assert programmed["status"] == "True"
    assert result.gateway_status[(NS, "own")]["addresses"][0]["value"] == "id.cfargotunnel.com"


def test_a_refused_gateway_says_invalid_parameters_and_serves_nothing() -> None:
    refused = asking("own", ref={**OWN, "name": "absent"})
    routes = [
        http_route("mine", ["mine.example.com"], [{"backendRefs": [backend("alpha")]}], parents=[{"name": "own"}])
    ]
    choices = choose([refused], [PARAMS], {CLASS_NAME}, cap=1)
    result = translate(world(routes, {"alpha": 8001}, gateways=[refused], planes=choices))
    accepted = next(c for c in result.gateway_status[(NS, "own")]["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "InvalidParameters")
    assert "absent not found" in accepted["message"]
    assert result.hostnames == []
    assert result.planes == {}


def test_a_planes_network_policy_lets_in_only_metrics_and_its_services_clients_and_out_only_what_it_needs() -> None:
    plane = choose([asking("edge")], [PARAMS], {CLASS_NAME}, cap=1)[(NS, "edge")]
    assert isinstance(plane, Plane)
    secrets = ({}, {})
    assert "NetworkPolicy" not in [b["kind"] for _, b in plane_objects(plane, SETTINGS, *secrets)]
    on = dataclasses.replace(SETTINGS, network_policy=True, xds_port=18123)
    (policy,) = [b for _, b in plane_objects(plane, on, *secrets) if b["kind"] == "NetworkPolicy"]
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"]["kflare.dev/data-plane"] == "kflare-gw-edge"
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # Scrapers, and the clients of its Service on Envoy's plaintext and Gateway HTTPS ports.
    assert [p["port"] for rule in spec["ingress"] for p in rule["ports"]] == [9902, 2000, 8080, 10443]
    xds = next(rule for rule in spec["egress"] if {"port": 18123, "protocol": "TCP"} in rule.get("ports", []))
    assert xds["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kflare-system"}}}]


# ---- a GatewayConfig of cloudflare-tunnel-gateway-controller -------------------------------------------------------

PACKAGE_CLASSES = Classes(frozenset({CONTROLLER_NAME}), "kflare-system")
CONFIG_REF = {"group": "cf.k8s.lex.la", "kind": "GatewayConfig", "name": "own"}
CONFIG = {
    "kind": "GatewayConfig",
    "metadata": meta("own"),
    "spec": {
        "tunnelTokenSecretRef": {"name": "tunnel-token"},
        "replicas": 1,
        "resources": {"requests": {"cpu": "50m"}},
        "image": "ghcr.io/example/proxy:v1",
        "authTokenSecretRef": {"name": "proxy-auth"},
    },
}
ACCOUNTS = {CLASS_NAME: "tunnel-gateway-cloudflare-tunnel"}


def configured(config: dict[str, Any] = CONFIG, cap: int = 3, **policy: Any) -> Any:
    return choose(
        [asking("edge", ref=CONFIG_REF)],
        [],
        {CLASS_NAME},
        PlanePolicy(cap, classes=PACKAGE_CLASSES, **policy),
        configs=[config],
        accounts=ACCOUNTS,
    )[(NS, "edge")]


def test_a_gateway_config_gives_a_plane_that_adopts_the_tunnel_of_its_token() -> None:
    plane = configured()
    assert isinstance(plane, Plane)
    assert plane.token == ("tunnel-token", "tunnel-token")
    assert plane.parameters == {
        "accountRef": {"name": "tunnel-gateway-cloudflare-tunnel"},
        "replicas": 1,
        "resources": {"requests": {"cpu": "50m"}},
    }
    objects = plane_objects(
        plane, SETTINGS, {k: "" for k in ("bootstrap.json", "ca.crt", "client.crt", "client.key")}, {}
    )
    deployment = next(body for _, body in objects if body["kind"] == "Deployment")
    envoy, cloudflared = deployment["spec"]["template"]["spec"]["containers"]
    assert (deployment["spec"]["replicas"], envoy["resources"]) == (1, {"requests": {"cpu": "50m"}})
    assert envoy["image"] == SETTINGS.envoy_image  # the package's proxy image is not run
    # cloudflared runs the token the adopted Tunnel writes, as in every plane.
    assert cloudflared["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "kflare-gw-edge-tunnel-token"
    tunnel = adopting_tunnel_object(plane, "made-by-hand")
    assert tunnel["spec"] == {
        "name": "made-by-hand",
        "accountRef": {"name": "tunnel-gateway-cloudflare-tunnel"},
        "credentialsSecretRef": {"name": "kflare-gw-edge-tunnel-token"},
    }
    annotations = tunnel["metadata"]["annotations"]
    assert (annotations["kflare.dev/adoption-policy"], annotations["kflare.dev/deletion-policy"]) == ("adopt", "retain")
    assert tunnel["metadata"]["ownerReferences"][0]["uid"] == "uid-edge"
    # Unset replicas are the package's default.
    bare = {**CONFIG, "spec": {"tunnelTokenSecretRef": {"name": "t", "key": "token"}}}
    plane = configured(bare)
    assert isinstance(plane, Plane)
    assert (plane.parameters["replicas"], plane.token) == (2, ("t", "token"))


def test_a_gateway_config_follows_the_cap_and_the_granted_namespaces() -> None:
    assert isinstance(configured(cap=1), Plane)
    assert "--gateway-planes-per-namespace=0" in str(configured(cap=0))
    assert "runs no data planes in namespace" in str(configured(namespaces=frozenset({"elsewhere"})))
    both = choose(
        [asking("first", ref=CONFIG_REF), asking("second", "2026-02-01T00:00:00Z")],
        [PARAMS],
        {CLASS_NAME},
        PlanePolicy(1, classes=PACKAGE_CLASSES),
        configs=[CONFIG],
        accounts=ACCOUNTS,
    )
    assert isinstance(both[(NS, "first")], Plane)
    assert "already has 1 Gateway(s)" in str(both[(NS, "second")])


def test_a_gateway_config_kflare_cannot_serve_is_refused_saying_why() -> None:
    assert str(configured({**CONFIG, "metadata": meta("other")})).endswith(f"GatewayConfig {NS}/own not found")
    scaled = {**CONFIG, "spec": {**CONFIG["spec"], "autoscaling": {"maxReplicas": 3, "targetInflightPerPod": 10}}}
    assert "give spec.replicas instead" in str(configured(scaled))
    credentials = {**CONFIG, "spec": {**CONFIG["spec"], "cloudflareCredentialsSecretRef": {"name": "other"}}}
    assert "cloudflareCredentialsSecretRef, which kflare does not read" in str(configured(credentials))
    invalid = {**CONFIG, "spec": {"replicas": 1}}
    assert "is not valid: spec.tunnelTokenSecretRef" in str(configured(invalid))
    # A class naming no GatewayClassConfig has no account to adopt the tunnel under.
    orphan = choose(
        [asking("edge", ref=CONFIG_REF)], [], {CLASS_NAME}, PlanePolicy(3, classes=PACKAGE_CLASSES), configs=[CONFIG]
    )[(NS, "edge")]
    assert f"GatewayClass {CLASS_NAME} names none" in str(orphan)
    # Without the package's kinds read, a GatewayConfig is no parameters kind of the class.
    unread = choose([asking("edge", ref=CONFIG_REF)], [], {CLASS_NAME}, 3, configs=[CONFIG], accounts=ACCOUNTS)
    assert "GatewayConfig.cf.k8s.lex.la is not a parameters kind of this class" in str(unread[(NS, "edge")])


def test_the_class_account_is_the_one_derived_from_its_gateway_class_config() -> None:
    config_ref = {"group": "cf.k8s.lex.la", "kind": "GatewayClassConfig", "name": "cloudflare-tunnel"}
    classes = [gateway_class(parameters=config_ref), gateway_class("kflare", {"kind": "Tunnel", "name": "t"})]
    assert class_accounts(classes, PACKAGE_CLASSES) == ACCOUNTS
    assert class_accounts(classes, Classes()) == {}


def test_a_connector_token_gives_its_account_and_tunnel_and_nothing_else() -> None:
    fields = {"a": "a" * 32, "t": "6ff42ae2-765d-4adf-8112-31c55c1551ef", "s": "c2VjcmV0"}
    token = base64.b64encode(json.dumps(fields).encode()).decode()
    assert connector_tunnel(base64.b64encode(token.encode()).decode()) == (fields["a"], fields["t"])
    unpadded = token.rstrip("=")
    assert connector_tunnel(base64.b64encode(f"{unpadded}\n".encode()).decode()) == (fields["a"], fields["t"])
    for wrong in (None, "", "not base64!", base64.b64encode(b"not a token").decode()):
        assert connector_tunnel(wrong) is None
    not_an_id = base64.b64encode(json.dumps({**fields, "t": "../x"}).encode()).decode()
    assert connector_tunnel(base64.b64encode(not_an_id.encode()).decode()) is None
