"""The Gateway class in pods: the chart's data plane Deployment with its defaults (Envoy fed by kflare's xDS over
mutual TLS, through the xDS Service's name; cloudflared's container run from the chart's image name, here the
stand-in of tests/e2e/cloudflared), and requests for the examples' routes handed to it as the edge hands them
reaching Service backends running as pods.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import h2.config
import h2.connection
import h2.events
import pytest
import yaml

from tests.chart.helm import CHART
from tests.e2e.cluster import GATEWAY
from tests.e2e.gateway import EDGE_PORT, NAMESPACE, GatewayRelease, tunnel_id
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
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "grpc-echo", "namespace": NAMESPACE},
            "spec": {"selector": {"app": "grpc-echo"}, "ports": [{"name": "grpc", "port": 3000}]},
        },
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
