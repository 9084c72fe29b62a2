"""The chart with `gateway.enabled` installed for real, and the controller running with nothing but the chart's RBAC
serving the class: its statuses and the gateway-exists finalizer written, nothing forbidden."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app.api.tunnel import TOKEN_KEY
from app.controlplane import ControlPlane, free_port
from reconcilers.gateway.kinds import GATEWAY_EXISTS_FINALIZER, GATEWAY_GROUP
from tests.chart.helm import ONE_HELM
from tests.chart.test_install import Release, can_i, read, release, sa_kubeconfig  # noqa: F401 (the fixture)
from tests.fixtures.controller import controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.xds import Delta, channel
from tests.helpers import eventually

pytestmark = pytest.mark.integration
V1 = "v1"


@ONE_HELM
async def test_the_class_runs_with_the_charts_rbac(
    release: Release,  # noqa: F811
    kube: ApiClient,
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    gateway_api: Path,
    tmp_path: Path,
) -> None:
    ns, full = release.namespace, release.fullname
    class_name = f"tunnel-{ns}"
    values = {
        "webhook": {"enabled": False},
        "gateway": {
            "enabled": True,
            "className": class_name,
            "tunnel": {"name": "edge"},
            "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}},
        },
    }
    await asyncio.to_thread(release.install, values)
    release.wait_crds()
    kubeconfig = await sa_kubeconfig(kube, control_plane, release)
    assert can_i(control_plane, kubeconfig, "watch", "httproutes.gateway.networking.k8s.io", "--all-namespaces")
    assert can_i(
        control_plane, kubeconfig, "patch", "gateways.gateway.networking.k8s.io", "--subresource=status", "-n", ns
    )
    assert not can_i(control_plane, kubeconfig, "create", "gateways.gateway.networking.k8s.io", "-n", ns)

    assert await read(kube, "Secret", f"{full}-xds", ns) is None, "the chart renders no generated material"
    # The controller's --gateway-xds-cert-dir and the data plane's /etc/envoy, here.
    xds = tmp_path / "xds"
    deployment = await read(kube, "Deployment", full, ns)
    chart_args = deployment.spec.template.spec.containers[0].args
    args = [
        a
        for a in chart_args[1:]
        if not a.startswith(("--health-probe-bind-address", "--metrics-", "--webhook-", "--gateway-xds-"))
        or a.startswith("--gateway-xds-host=")
    ]
    assert "--gateway-enabled=true" in args
    assert f"--gateway-xds-host={full}-xds.{ns}.svc" in args
    xds_port = free_port()
    args += [f"--gateway-xds-bind-address=127.0.0.1:{xds_port}", f"--gateway-xds-cert-dir={xds}"]
    objects = client.CustomObjectsApi(kube)
    gateway = {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": "edge"},
        "spec": {"gatewayClassName": class_name, "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
    }
    route = {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "web"},
        "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["web.example.com"], "rules": [{}]},
    }
    await objects.create_namespaced_custom_object(GATEWAY_GROUP, V1, ns, "gateways", gateway)
    await objects.create_namespaced_custom_object(GATEWAY_GROUP, V1, ns, "httproutes", route)

    async def status(plural: str, name: str, namespaced: bool = True) -> dict[str, Any]:
        if namespaced:
            return dict(await objects.get_namespaced_custom_object(GATEWAY_GROUP, V1, ns, plural, name))
        return dict(await objects.get_cluster_custom_object(GATEWAY_GROUP, V1, plural, name))

    with controller_process(control_plane, fresh_emulator, tmp_path, *args, f"--kubeconfig={kubeconfig}") as proc:

        async def written() -> bool:
            cls = await status("gatewayclasses", class_name, namespaced=False)
            gw = await status("gateways", "edge")
            web = await status("httproutes", "web")
            accepted = {c["type"]: c for c in (cls.get("status") or {}).get("conditions") or []}.get("Accepted")
            return bool(
                accepted
                and accepted["reason"] == "InvalidParameters"
                and GATEWAY_EXISTS_FINALIZER in (cls["metadata"].get("finalizers") or [])
                and (gw.get("status") or {}).get("listeners")
                and (web.get("status") or {}).get("parents")
            )

        await eventually(written, what="the class, Gateway and route statuses and the finalizer")
        # What the controller made, under the chart's RBAC: the data plane's part of it, as its pod mounts it.
        secret = await read(kube, "Secret", f"{full}-xds", ns)
        for key in ("client.crt", "client.key"):
            (xds / key).write_bytes(base64.b64decode(secret.data[key]))
        assert base64.b64decode(secret.data["token"]).decode() == (xds / "token").read_text()
        await the_chart_certificates_authenticate(xds, xds_port, f"{full}-xds.{ns}.svc")
        assert await read(kube, "Secret", f"{full}-origin-tls", ns) is not None
        await objects.delete_namespaced_custom_object(GATEWAY_GROUP, V1, ns, "gateways", "edge")

        async def released() -> bool:
            cls = await status("gatewayclasses", class_name, namespaced=False)
            return GATEWAY_EXISTS_FINALIZER not in (cls["metadata"].get("finalizers") or [])

        await eventually(released, what="the finalizer to go with the last Gateway")
        log = proc.log()
    denied = [line for line in log.splitlines() if "forbidden" in line.lower() or " 403" in line or '"403' in line]
    assert not denied, "\n".join(denied[:10])

    # An upgrade keeps the xDS token and certificates (the controller's, not the release's): the running data plane
    # keeps authenticating.
    await asyncio.to_thread(release.upgrade, values)
    again = await read(kube, "Secret", f"{full}-xds", ns)
    for key in ("token", "ca.crt", "tls.crt", "tls.key", "client.crt", "client.key"):
        assert again.data[key] == secret.data[key], key


async def the_chart_certificates_authenticate(xds: Path, port: int, host: str) -> None:
    """The listener, serving the certificate the controller made, takes Envoy's client certificate and token (a
    response, or UNAVAILABLE from a standby) and refuses a client without a certificate in the handshake."""
    ca = (xds / "ca.crt").read_bytes()
    token = (xds / "token").read_text()
    envoys = grpc.ssl_channel_credentials(ca, (xds / "client.key").read_bytes(), (xds / "client.crt").read_bytes())
    async with channel(port, envoys, host=host) as ch:
        stream = Delta(ch, token)
        await stream.send("clusters")
        answer = await stream.outcome()
        if isinstance(answer, grpc.aio.AioRpcError):
            assert (answer.code(), answer.details()) == (grpc.StatusCode.UNAVAILABLE, "no configuration to serve here")
    async with channel(port, grpc.ssl_channel_credentials(ca), host=host) as ch:
        stream = Delta(ch, token)
        await stream.send("clusters")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stream.receive()
        assert refused.value.details() != "no configuration to serve here"


async def test_the_data_plane_reads_the_secret_its_tunnel_names(
    release: Release,  # noqa: F811
    kube: ApiClient,
    gateway_api: Path,
) -> None:
    """Once the Tunnel exists, the chart reads its token Secret from it: no value to keep in step, and a value that
    disagrees with the Tunnel is refused rather than leaving cloudflared without a token."""
    ns, full = release.namespace, release.fullname
    gateway = {"enabled": True, "className": f"tunnel-{ns}", "tunnel": {"name": "edge"}}
    first = {**gateway, "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}}}
    await asyncio.to_thread(release.install, {"webhook": {"enabled": False}, "gateway": first})
    release.wait_crds()
    tunnel = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "Tunnel",
        "metadata": {"name": "edge", "namespace": ns},
        "spec": {
            "name": "edge",
            "accountRef": {"name": "nobody"},
            "credentialsSecretRef": {"name": "edge-credentials"},
        },
    }
    objects = client.CustomObjectsApi(kube)
    await objects.create_namespaced_custom_object("kflare.dev", "v1alpha1", ns, "tunnels", tunnel)
    try:
        await asyncio.to_thread(release.upgrade, {"webhook": {"enabled": False}, "gateway": gateway})
        deployment = await read(kube, "Deployment", f"{full}-data-plane", ns)
        cloudflared = next(c for c in deployment.spec.template.spec.containers if c.name == "cloudflared")
        ref = cloudflared.env[0].value_from.secret_key_ref
        assert (ref.name, ref.key) == ("edge-credentials", TOKEN_KEY)
        wrong = {**gateway, "dataPlane": {"tunnelTokenSecret": {"name": "other"}}}
        refused = r"the Tunnel \S+/edge writes its token to the Secret edge-credentials"
        with pytest.raises(AssertionError, match=refused):
            await asyncio.to_thread(release.upgrade, {"webhook": {"enabled": False}, "gateway": wrong})
    finally:
        # No controller runs here to hold it; left behind, a later test's controller would reconcile it.
        await objects.delete_namespaced_custom_object("kflare.dev", "v1alpha1", ns, "tunnels", "edge")
