"""The Gateway class in pods: the chart's data plane Deployment with its defaults (Envoy fed by kflare's xDS over
mutual TLS, through the xDS Service's name; cloudflared's container run from the chart's image name, here the
stand-in of tests/e2e/cloudflared), and requests for the examples' routes handed to it as the edge hands them
reaching Service backends running as pods; and a Gateway with a data plane of its own, in another namespace, made
by kflare, serving its route, and taken down with it.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import Any

import h2.config
import h2.connection
import h2.events
import httpx
import pytest
import yaml

from app.dev import DEV_TOKEN
from tests.chart.helm import CHART
from tests.e2e.cluster import GATEWAY
from tests.e2e.gateway import EDGE_PORT, METRICS_PORT, NAMESPACE, GatewayRelease, tunnel_id
from tests.e2e.test_chart import deadline

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ECHO_METHOD = "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())["gateway"]["dataPlane"]


def backend(name: str, image: str, replicas: int = 2, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A Deployment of the echo server the conformance suite uses: it answers with what it received and who it is."""
    variables: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in (env or {}).items()]
    variables += [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "echo", "image": image, "env": variables}]},
            },
        },
    }


def backend_service(name: str, namespace: str, port_name: str, port: int) -> dict[str, Any]:
    """The Service of `backend(name, ...)`'s pods."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [{"name": port_name, "port": port}]},
    }


def wait_available(gw: GatewayRelease, name: str, replicas: int = 2) -> None:
    for _ in deadline(180):
        status = gw.get("deployment", name, "-n", NAMESPACE).get("status", {})
        if status.get("availableReplicas") == replicas:
            return


@pytest.fixture(scope="module")
def data_plane(gateway_release: GatewayRelease) -> list[dict[str, Any]]:
    return gateway_release.wait_data_plane_ready(DEFAULTS["replicas"])


def test_the_data_plane_runs_with_the_charts_defaults(gateway_release: GatewayRelease, data_plane: list[Any]) -> None:
    """Two pods, Envoy and cloudflared from the chart's image names; cloudflared reads the token from the Secret
    the Tunnel writes, under the key it writes it, and the token is that Tunnel's: a configuration for another
    tunnel is refused by the connector."""
    assert len(data_plane) == DEFAULTS["replicas"] == 2
    tunnel = gateway_release.tunnel()
    for pod in data_plane:
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        assert containers["envoy"]["image"] == DEFAULTS["envoyImage"]
        assert containers["cloudflared"]["image"] == DEFAULTS["cloudflaredImage"]
        (env,) = containers["cloudflared"]["env"]
        assert env["valueFrom"]["secretKeyRef"] == {
            "name": tunnel["spec"]["credentialsSecretRef"]["name"],
            "key": "TUNNEL_TOKEN",
        }
    secret = gateway_release.get("secret", tunnel["spec"]["credentialsSecretRef"]["name"], "-n", NAMESPACE)
    token = json.loads(base64.b64decode(base64.b64decode(secret["data"]["TUNNEL_TOKEN"])))
    assert token["t"] == tunnel_id(tunnel)
    document = gateway_release.ingress_document()
    refused = gateway_release.push(data_plane[0], {**document, "tunnel_id": "0" * 32})
    assert refused.status_code == 409, refused.text


def test_only_cloudflareds_readiness_and_metrics_are_reachable_from_outside_the_pod(data_plane: list[Any]) -> None:
    """cloudflared's metrics listener also serves its configuration (`/config`), diagnostics and pprof: it listens
    on the pod's loopback, and the pod's port passes on GET /ready (the kubelet's probe) and GET /metrics only."""
    pod_ip = data_plane[0]["status"]["podIP"]
    with httpx.Client(timeout=10, trust_env=False) as http:
        assert http.get(f"http://{pod_ip}:{METRICS_PORT}/ready").status_code == 200
        metrics = http.get(f"http://{pod_ip}:{METRICS_PORT}/metrics")
        assert metrics.status_code == 200
        assert "cloudflared_tunnel_ha_connections 1" in metrics.text
        for method, path in (("GET", "/config"), ("GET", "/debug/pprof/"), ("POST", "/metrics"), ("GET", "/diag")):
            reply = http.request(method, f"http://{pod_ip}:{METRICS_PORT}{path}")
            assert reply.status_code == 404, f"{method} {path}: {reply.status_code} {reply.text[:200]}"
        with pytest.raises(httpx.ConnectError):
            http.get(f"http://{pod_ip}:20000/config")  # cloudflared's own listener, on loopback only


def test_a_route_of_the_examples_reaches_its_backend_pods(
    gateway_release: GatewayRelease, data_plane: list[dict[str, Any]]
) -> None:
    """examples/gateway's route for hello.example.com: one ingress rule to Envoy in the same pod, and each pod's
    connector hands the visitor's request to it; the backend pods of the Service `hello` answer, seeing the public
    hostname and cloudflared's headers."""
    gateway_release.apply(backend("hello", gateway_release.echo_image, env={"HTTP_PORT": "80"}))
    wait_available(gateway_release, "hello")
    document = gateway_release.push_all()
    rules = document["config"]["ingress"]
    assert {"hostname": "hello.example.com", "service": "http://localhost:8080"} in rules
    assert rules[-1] == {"service": "http_status:404"}

    answered: set[str] = set()
    for pod in data_plane:
        reply = None
        for _ in deadline(60):  # Envoy takes the route and the endpoints once its xDS stream is open
            reply = gateway_release.visit(pod, "hello.example.com", "/greet?x=1")
            if reply.status_code == 200:
                break
        assert reply is not None
        assert reply.status_code == 200, reply.text
        echo = reply.json()
        assert echo["namespace"] == NAMESPACE
        assert echo["pod"].startswith("hello-")
        assert echo["host"] == "hello.example.com"
        assert echo["path"] == "/greet?x=1"
        headers = {k.lower(): v for k, v in echo["headers"].items()}
        assert headers["cf-connecting-ip"] == [GATEWAY]  # the visitor: this host, on the bridge
        assert headers["x-forwarded-for"][0].split(",")[0].strip() == GATEWAY
        answered.add(echo["pod"])
        assert gateway_release.visit(pod, "nowhere.example.com").status_code == 404
    assert answered


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def test_backends_see_the_visitors_scheme(gateway_release: GatewayRelease, data_plane: list[dict[str, Any]]) -> None:
    reply = gateway_release.visit(data_plane[0], "hello.example.com")
    assert reply.status_code == 200, reply.text
    headers = {k.lower(): v for k, v in reply.json()["headers"].items()}
    assert headers["x-forwarded-proto"] == ["https"]


def grpc_call(host: str, port: int, authority: str, method: str, timeout: float = 10.0) -> dict[str, str]:
    """One unary gRPC call with an empty message over cleartext HTTP/2, as the edge forwards one: the response's
    headers and trailers, merged."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    got: dict[str, str] = {}
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        conn.initiate_connection()
        stream = conn.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":authority", authority),
            (":path", method),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        conn.send_headers(stream, headers)
        conn.send_data(stream, b"\x00\x00\x00\x00\x00", end_stream=True)
        sock.sendall(conn.data_to_send())
        ended = False
        while not ended:
            data = sock.recv(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                    got.update({_text(k): _text(v) for k, v in event.headers or []})
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    ended = True
            sock.sendall(conn.data_to_send())
    return got


def test_a_grpc_route_reaches_its_backend_over_http2_with_tls(
    gateway_release: GatewayRelease, data_plane: list[dict[str, Any]]
) -> None:
    gateway_release.apply(
        backend("grpc-echo", gateway_release.echo_image, env={"GRPC_ECHO_SERVER": "1", "HTTP_PORT": "3000"}),
        backend_service("grpc-echo", NAMESPACE, "grpc", 3000),
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GRPCRoute",
            "metadata": {"name": "grpc-echo", "namespace": NAMESPACE},
            "spec": {
                "parentRefs": [{"name": "web"}],
                "hostnames": ["grpc.example.com"],
                "rules": [{"backendRefs": [{"name": "grpc-echo", "port": 3000}]}],
            },
        },
    )
    wait_available(gateway_release, "grpc-echo")
    rule: dict[str, Any] = {}
    for _ in deadline(60):
        document = gateway_release.push_all()
        rule = next((r for r in document["config"]["ingress"] if r.get("hostname") == "grpc.example.com"), {})
        if rule:
            break
    assert rule["service"].startswith("https://localhost:"), rule
    pod = data_plane[0]
    got: dict[str, str] = {}
    for _ in deadline(60):
        got = grpc_call(pod["status"]["podIP"], EDGE_PORT, "grpc.example.com", ECHO_METHOD)
        if got.get("grpc-status") == "0":
            break
    assert got.get(":status") == "200", got
    assert got.get("grpc-status") == "0", got


TEAM = "team-e2e"


def _first_pod(gw: GatewayRelease, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = gw.get("pods", "-n", TEAM, "-l", selector)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def test_a_gateway_with_its_own_data_plane_serves_its_route_and_goes_with_it(
    gateway_release: GatewayRelease, capsys: pytest.CaptureFixture[str]
) -> None:
    """GatewayParameters in another namespace than the release: kflare makes the Gateway's Tunnel and Deployment
    there; its Envoy, from the copied bootstrap and client certificate, opens its xDS stream across namespaces and is
    served its own plane's routes; its connector gets its own tunnel's document; a visitor reaches the backend. The
    figure printed: `kubectl apply` of the Gateway to its Deployment's pods created, and to them Ready."""
    gw = gateway_release
    account = gw.tunnel()["spec"]["accountRef"]["name"]
    gw.kubectl("create", "namespace", TEAM, check=False)
    # example.com is the demo namespace's Zone: it grants the team its name, as a platform team would.
    team = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [TEAM]}
    grant = {
        "namespaces": {"from": "Selector", "selector": {"matchExpressions": [team]}},
        "hostnames": ["shop.example.com"],
    }
    gw.kubectl(
        "patch",
        "zone",
        "example-com",
        "-n",
        "demo",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"hostnameGrants": [grant]}}),
    )
    echo = backend("team-echo", gw.echo_image, replicas=1, env={"HTTP_PORT": "80"})
    echo["metadata"]["namespace"] = TEAM
    gw.apply(
        echo,
        backend_service("team-echo", TEAM, "http", 80),
        {
            "apiVersion": "kflare.dev/v1alpha1",
            "kind": "GatewayParameters",
            "metadata": {"name": "own", "namespace": TEAM},
            "spec": {"accountRef": {"name": account}, "replicas": 1, "tunnelDeletionPolicy": "delete"},
        },
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "shop", "namespace": TEAM},
            "spec": {
                "parentRefs": [{"name": "shop"}],
                "hostnames": ["shop.example.com"],
                "rules": [{"backendRefs": [{"name": "team-echo", "port": 80}]}],
            },
        },
    )
    applied = time.monotonic()
    gw.apply(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "shop", "namespace": TEAM},
            "spec": {
                "gatewayClassName": "cloudflare-tunnel",
                "infrastructure": {
                    "parametersRef": {"group": "kflare.dev", "kind": "GatewayParameters", "name": "own"},
                    "labels": {"team": "shop"},
                },
                "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
            },
        }
    )
    selector = "kflare.dev/data-plane=kflare-gw-shop"
    for _ in deadline(120, interval=0.1):
        if _first_pod(gw, selector):
            break
    created = time.monotonic() - applied
    tunnel: dict[str, Any] = {}
    for _ in deadline(120):
        tunnel = gw.get("tunnel", "kflare-gw-shop", "-n", TEAM)
        if tunnel_id(tunnel):
            break
    account_id = gw.get("cloudflareaccount", account)["spec"]["accountID"]
    url = f"{gw.emulator.base_url}/accounts/{account_id}/cfd_tunnel/{tunnel_id(tunnel)}/configurations"
    pods: list[dict[str, Any]] = []
    ready_at = 0.0
    try:
        for _ in deadline(240):
            pods = _first_pod(gw, selector)
            with httpx.Client(timeout=10, trust_env=False) as http:
                document = http.get(url, headers={"Authorization": f"Bearer {DEV_TOKEN}"}).json()["result"]
            for pod in pods:
                if pod["status"].get("podIP"):
                    gw.push(pod, document)
            if pods and all(_pod_ready(p) for p in pods):
                ready_at = time.monotonic() - applied
                break
    except AssertionError as exc:
        raise AssertionError(f"{exc}: the Gateway's own data plane is not Ready\n{_describe(gw, pods)}") from None
    with capsys.disabled():
        print(f"\nGateway with its own plane: pods created {created:.1f}s after kubectl apply, Ready {ready_at:.1f}s")
    (pod,) = pods
    assert pod["metadata"]["labels"]["team"] == "shop"
    rules = document["config"]["ingress"]
    assert {"hostname": "shop.example.com", "service": "http://localhost:8080"} in rules
    reply = None
    for _ in deadline(60):
        reply = gw.visit(pod, "shop.example.com", "/buy")
        if reply.status_code == 200:
            break
    assert reply is not None
    assert reply.json()["pod"].startswith("team-echo-")
    # The shared plane does not serve the Gateway's hostname: its routes are its own plane's only.
    shared = gw.data_plane_pods()[0]
    assert gw.visit(shared, "shop.example.com").status_code == 404

    gw.kubectl("delete", "gateway", "shop", "-n", TEAM, "--wait=false")
    for _ in deadline(120):
        left = gw.get("deployment,tunnel.kflare.dev,gateway", "-n", TEAM, "-l", "kflare.dev/gateway=shop")["items"]
        if not left and not gw.get("gateway", "-n", TEAM)["items"]:
            break


def _pod_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def _describe(gw: GatewayRelease, pods: list[dict[str, Any]]) -> str:
    lines = []
    for pod in pods:
        name = pod["metadata"]["name"]
        for status in pod["status"].get("containerStatuses") or []:
            lines.append(
                f"{name}/{status['name']}: ready={status.get('ready')} state={json.dumps(status.get('state'))}"
            )
            logs = gw.kubectl("logs", name, "-n", TEAM, "-c", status["name"], "--tail=20", check=False)
            lines += [f"  {line}" for line in logs.splitlines()]
    return "\n".join(lines) or "no pod"


TENANTS = ("tenant-a-e2e", "tenant-b-e2e")


def _grant_names(gw: GatewayRelease, namespace: str, hostnames: list[str]) -> None:
    """The demo namespace's Zone (example.com) grants `namespace` these names, beside what it granted before."""
    zone = gw.get("zone", "example-com", "-n", NAMESPACE)
    grants = list(zone["spec"].get("hostnameGrants") or [])
    match = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
    grants.append(
        {"namespaces": {"from": "Selector", "selector": {"matchExpressions": [match]}}, "hostnames": hostnames}
    )
    patch = json.dumps({"spec": {"hostnameGrants": grants}})
    gw.kubectl("patch", "zone", "example-com", "-n", NAMESPACE, "--type=merge", "-p", patch)


def _tenant_route(namespace: str, hostnames: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "app", "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": "tenants", "namespace": NAMESPACE}],
            "hostnames": hostnames,
            "rules": [{"backendRefs": [{"name": "echo", "port": 80}]}],
        },
    }


def _served_by(gw: GatewayRelease, pod: dict[str, Any], host: str) -> str | None:
    """The namespace of the backend that answers `host` through the plane; None: nobody serves it (a 404); "": not
    settled yet (Envoy without the route's endpoints, say)."""
    gw.push(pod, gw.ingress_document())
    reply = gw.visit(pod, host)
    if reply.status_code == 404:
        return None
    return str(reply.json()["namespace"]) if reply.status_code == 200 else ""


def test_two_tenants_on_the_shared_plane_cannot_take_each_others_hostnames(
    gateway_release: GatewayRelease, data_plane: list[dict[str, Any]]
) -> None:
    """Two teams' routes on one shared Gateway, each granted its own names by the platform's Zone: a route naming the
    other team's name is not served for it, with real requests through the data plane, and deleting and re-creating
    the owner's route never hands the name over."""
    gw = gateway_release
    a, b = TENANTS
    for namespace in TENANTS:
        gw.kubectl("create", "namespace", namespace, check=False)
        echo = backend("echo", gw.echo_image, replicas=1, env={"HTTP_PORT": "80"})
        echo["metadata"]["namespace"] = namespace
        gw.apply(echo, backend_service("echo", namespace, "http", 80))
        _grant_names(gw, namespace, [f"*.{namespace}.example.com"])
    gw.apply(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "tenants", "namespace": NAMESPACE},
            "spec": {
                "gatewayClassName": "cloudflare-tunnel",
                "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}
                ],
            },
        }
    )
    theirs, mine = f"app.{a}.example.com", f"app.{b}.example.com"
    gw.apply(_tenant_route(a, [theirs]), _tenant_route(b, [theirs, mine]))  # b reaches for a's name too
    pod = data_plane[0]
    for _ in deadline(180):
        if _served_by(gw, pod, theirs) == a and _served_by(gw, pod, mine) == b:
            break
    route = gw.get("httproute", "app", "-n", b)
    (parent,) = route["status"]["parents"]
    accepted = next(c for c in parent["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "True"
    assert theirs in accepted["message"], accepted  # said: not served for a's name
    assert a not in accepted["message"].replace(theirs, ""), "the owner's namespace is not told to another"

    # The owner's route goes: nobody serves its name meanwhile (b's route does not take it over), and it comes back.
    gw.kubectl("delete", "httproute", "app", "-n", a)
    for _ in deadline(120):
        if _served_by(gw, pod, theirs) is None:
            break
    assert _served_by(gw, pod, mine) == b
    gw.apply(_tenant_route(a, [theirs]))
    for _ in deadline(120):
        if _served_by(gw, pod, theirs) == a:
            break
    gw.kubectl("delete", "gateway", "tenants", "-n", NAMESPACE)


UNINSTALL = (
    "kubectl delete gateways.gateway.networking.k8s.io --all -A --wait --timeout=5m",
    "kubectl delete kflare --all -A --wait --timeout=5m",
    "kubectl delete cloudflareaccounts.kflare.dev --all --wait --timeout=5m",
    "helm uninstall kflare -n kflare-system --wait",
    "kubectl delete secret -n kflare-system -l app.kubernetes.io/managed-by=kflare",
)
"""docs/deploy.md's "Uninstalling" steps, in order (the release's name and namespace are this test's)."""


def test_the_uninstall_sequence_leaves_nothing_behind(gateway_release: GatewayRelease) -> None:
    """The guide's uninstall steps, run as written (last in this module: it takes the release down): the Gateways
    first take their hostnames off Cloudflare and let go of the class; then every kflare resource goes; then the
    release and the Secrets the controller made. Nothing is left Terminating, no pod of the release runs, and the
    class's DNS record is gone from Cloudflare."""
    gw = gateway_release
    guide = (CHART.parents[1] / "docs" / "deploy.md").read_text()
    for command in UNINSTALL:
        assert command in guide, f"docs/deploy.md no longer says {command!r}: keep the two in step"
    cf = gw.emulator.client(token=DEV_TOKEN)
    zone_id = next(z.id for z in cf.zones.list() if z.name == "example.com")
    assert "hello.example.com" in {r.name for r in cf.dns.records.list(zone_id=zone_id)}
    assert gw.get("gatewayclass", "cloudflare-tunnel")["metadata"].get("finalizers")

    def run(command: str) -> None:
        words = command.split()
        if words[0] == "helm":
            gw.release.uninstall("--wait")
            return
        gw.cluster.kubectl(*[NAMESPACE if w == "kflare-system" else w for w in words[1:]], timeout=330)

    run(UNINSTALL[0])
    assert not gw.get("gateways.gateway.networking.k8s.io", "-A")["items"]
    for _ in deadline(120):
        released = not gw.get("gatewayclass", "cloudflare-tunnel")["metadata"].get("finalizers")
        if released and "hello.example.com" not in {r.name for r in cf.dns.records.list(zone_id=zone_id)}:
            break
    run(UNINSTALL[1])
    run(UNINSTALL[2])
    assert not gw.get("kflare", "-A")["items"], "every kflare resource went while the controller ran"
    run(UNINSTALL[3])
    run(UNINSTALL[4])
    for _ in deadline(180):
        selector = f"app.kubernetes.io/instance={gw.release.name}"
        if not gw.get("pods", "-n", NAMESPACE, "-l", selector)["items"]:
            break
    assert not gw.get("gatewayclass")["items"] or all(
        c["metadata"]["name"] != "cloudflare-tunnel" for c in gw.get("gatewayclass")["items"]
    ), "the class went with the release, not left Terminating"
    kept = gw.get("secrets", "-n", NAMESPACE, "-l", "app.kubernetes.io/managed-by=kflare")["items"]
    assert not kept, [s["metadata"]["name"] for s in kept]
