"""Tunnels end to end: the expose-a-service example, the token Secret, the configuration's owner and its drift, a
tunnel deleted in Cloudflare, and deletion in any order. The controller is its own process, against the real API
server and the emulator (whose simulated connectors stand in for cloudflared)."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from app.controlplane import ControlPlane
from tests.fixtures.controller import ControllerProcess, Kflare, controller_process
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import cf

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "expose-a-service"
KFLARE_KINDS = {"Zone", "Tunnel", "TunnelConfiguration", "DNSRecord"}
SERVICE = "http://web.default.svc:80"


def tunnels(emulator: EmulatorProcess, **params: str) -> list[dict[str, Any]]:
    return list(cf(emulator, "GET", f"/accounts/{emulator.account_id}/cfd_tunnel", params=params))


def configuration(emulator: EmulatorProcess, tunnel_id: str) -> dict[str, Any]:
    result: dict[str, Any] = cf(
        emulator, "GET", f"/accounts/{emulator.account_id}/cfd_tunnel/{tunnel_id}/configurations"
    )
    return result


def token_payload(secret: client.V1Secret) -> dict[str, Any]:
    token = base64.b64decode(secret.data["TUNNEL_TOKEN"]).decode()
    try:
        payload: dict[str, Any] = json.loads(base64.b64decode(token))
    except ValueError as exc:
        raise AssertionError(f"not a tunnel token: {exc}") from None
    return payload


async def make_tunnel(kflare: Kflare, name: str = "tunnel", secret: str = "tok", **annotations: str) -> str:
    await kflare.apply(
        {
            "kind": "Tunnel",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"name": f"{kflare.namespace}-{name}", "accountRef": {"name": kflare.account},
                     "credentialsSecretRef": {"name": secret}},
        }
    )  # fmt: skip
    ready = await kflare.ready("Tunnel", name)
    return str(ready["status"]["cloudflareMetadata"]["tunnelID"])


async def make_config(kflare: Kflare, name: str, host: str = "app.example.com", tunnel: str = "tunnel") -> None:
    await kflare.apply(
        {
            "kind": "TunnelConfiguration",
            "metadata": {"name": name},
            "spec": {"tunnelRef": {"name": tunnel}, "ingress": [{"hostname": host, "service": SERVICE}]},
        }
    )


def example_resources(kflare: Kflare) -> list[dict[str, Any]]:
    """The example's kflare resources, moved into the test's namespace and account."""
    out = []
    for path in sorted(EXAMPLE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] in KFLARE_KINDS:
                doc["metadata"]["namespace"] = kflare.namespace
                if "accountRef" in doc["spec"]:
                    doc["spec"]["accountRef"]["name"] = kflare.account
                out.append(doc)
    return out


async def test_the_example_exposes_a_service_end_to_end(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    for doc in example_resources(kflare):
        await kflare.apply(doc)
    for doc in example_resources(kflare):
        await kflare.ready(doc["kind"], doc["metadata"]["name"], reason="Synced")

    tunnel = await kflare.get("Tunnel", "web")
    tunnel_id = tunnel["status"]["cloudflareMetadata"]["tunnelID"]
    assert tunnel["status"]["cloudflareMetadata"]["status"] == "inactive"
    held = tunnels(fresh_emulator, name="web-example-net", is_deleted="false")
    assert [t["id"] for t in held] == [tunnel_id]
    assert held[0]["config_src"] == "cloudflare"

    # The token Secret cloudflared runs from: owned by the Tunnel, holding this tunnel's token.
    secret = await kflare.core.read_namespaced_secret("web-tunnel-token", kflare.namespace)
    assert token_payload(secret)["t"] == tunnel_id
    (owner,) = secret.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Tunnel", "web", tunnel["metadata"]["uid"], True)

    # The ingress document: the rule to the Service, then the catch-all.
    config = configuration(fresh_emulator, tunnel_id)
    assert config["config"]["ingress"] == [
        {
            "hostname": "app.example.net",
            "service": "http://web.web.svc.cluster.local:80",
            "originRequest": {"connectTimeout": 10, "keepAliveTimeout": 60},
        },
        {"service": "http_status:404"},
    ]
    assert (await kflare.get("TunnelConfiguration", "web"))["status"]["cloudflareMetadata"]["version"] == 1

    # The hostname: a proxied CNAME to the tunnel.
    zone_id = (await kflare.get("Zone", "example-net"))["status"]["cloudflareMetadata"]["zoneID"]
    (record,) = cf(fresh_emulator, "GET", f"/zones/{zone_id}/dns_records", params={"name": "app.example.net"})
    assert (record["type"], record["content"], record["proxied"]) == ("CNAME", f"{tunnel_id}.cfargotunnel.com", True)

    # cloudflared connects: the tunnel turns healthy; it goes: down.
    client_id = fresh_emulator.connect_tunnel(tunnel_id)

    async def status(wanted: str) -> bool:
        got = (await kflare.get("Tunnel", "web"))["status"]["cloudflareMetadata"]["status"]
        assert got == wanted, got
        return True

    await eventually(lambda: status("healthy"), timeout=30, what="the tunnel to be healthy")
    failing = fresh_emulator.connect_tunnel(tunnel_id, failed=2)
    await eventually(lambda: status("degraded"), timeout=30, what="the tunnel to be degraded")
    fresh_emulator.disconnect_tunnel(tunnel_id, client_id)
    fresh_emulator.disconnect_tunnel(tunnel_id, failing)
    await eventually(lambda: status("down"), timeout=30, what="the tunnel to be down")

    # The token is a credential: it never shows in the controller's log.
    token = base64.b64decode(secret.data["TUNNEL_TOKEN"]).decode()
    log = controller.log()
    assert token not in log
    assert secret.data["TUNNEL_TOKEN"] not in log


def test_the_examples_cloudflared_deployment_passes_the_api_server_and_restricted_pod_security(
    control_plane: ControlPlane, kflare_crds: None
) -> None:
    namespace = f"web-{uuid.uuid4().hex[:8]}"
    docs = [d for d in yaml.safe_load_all((EXAMPLE / "00-namespace.yaml").read_text())]
    docs[0]["metadata"]["name"] = namespace
    deployment = yaml.safe_load((EXAMPLE / "40-cloudflared.yaml").read_text())
    deployment["metadata"]["namespace"] = namespace
    kubectl = [str(control_plane.binary("kubectl")), "--kubeconfig", str(control_plane.kubeconfig_path)]
    subprocess.run([*kubectl, "apply", "-f", "-"], input=yaml.safe_dump(docs[0]), text=True, check=True, timeout=60)
    done = subprocess.run(
        [*kubectl, "apply", "--dry-run=server", "-f", "-"],
        input=yaml.safe_dump(deployment),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "created (server dry run)" in done.stdout
    assert "Warning" not in done.stderr, done.stderr  # PodSecurity warns of a workload that would violate it
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert ":" in container["image"]
    assert not container["image"].endswith(":latest")
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"


async def test_a_secret_kflare_does_not_own_is_never_overwritten(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    mine = client.V1Secret(metadata=client.V1ObjectMeta(name="tok"), data={"TUNNEL_TOKEN": "bWluZQ=="})
    await kflare.core.create_namespaced_secret(kflare.namespace, mine)
    await kflare.apply(
        {
            "kind": "Tunnel",
            "metadata": {"name": "tunnel"},
            "spec": {"name": "t1", "accountRef": {"name": kflare.account}, "credentialsSecretRef": {"name": "tok"}},
        }
    )
    await kflare.ready("Tunnel", "tunnel", status="False", reason="CredentialsSecretConflict")
    secret = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
    assert secret.data == {"TUNNEL_TOKEN": "bWluZQ=="}
    assert not secret.metadata.owner_references

    # Pointing at a free name resolves it; the user's Secret stays as it was.
    await kflare.patch("Tunnel", "tunnel", {"spec": {"credentialsSecretRef": {"name": "tok2"}}})
    await kflare.ready("Tunnel", "tunnel", reason="Synced")
    assert (await kflare.core.read_namespaced_secret("tok", kflare.namespace)).data == {"TUNNEL_TOKEN": "bWluZQ=="}


async def test_a_token_secret_deleted_or_edited_by_hand_is_restored(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    tunnel_id = await make_tunnel(kflare)

    async def restored() -> bool:
        secret = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
        assert token_payload(secret)["t"] == tunnel_id
        return True

    await eventually(restored, what="the token Secret")
    await kflare.core.delete_namespaced_secret("tok", kflare.namespace)
    await eventually(restored, timeout=30, what="the deleted token Secret to be restored")
    await kflare.core.patch_namespaced_secret("tok", kflare.namespace, {"data": {"TUNNEL_TOKEN": "ZWRpdGVk"}})
    await eventually(restored, timeout=30, what="the edited token Secret to be restored")


async def test_the_oldest_configuration_owns_the_tunnel(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.ready_zone()
    tunnel_id = await make_tunnel(kflare)
    await make_config(kflare, "first", "app.example.com")
    await kflare.ready("TunnelConfiguration", "first", reason="Synced")
    await make_config(kflare, "second", "other.example.com")
    second = await kflare.ready("TunnelConfiguration", "second", status="False", reason="TunnelAlreadyConfigured")
    assert "first" in second["status"]["conditions"][0]["message"]
    hosts = [r.get("hostname") for r in configuration(fresh_emulator, tunnel_id)["config"]["ingress"]]
    assert hosts == ["app.example.com", None]

    # The owner goes: its rules go with it, and the next one takes the tunnel.
    await kflare.delete("TunnelConfiguration", "first")
    await kflare.gone("TunnelConfiguration", "first")
    await kflare.ready("TunnelConfiguration", "second", reason="Synced", timeout=20)  # at once, not in a minute
    hosts = [r.get("hostname") for r in configuration(fresh_emulator, tunnel_id)["config"]["ingress"]]
    assert hosts == ["other.example.com", None]


async def test_an_idle_resync_writes_nothing_and_drift_in_cloudflare_is_corrected(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.ready_zone()
    tunnel_id = await make_tunnel(kflare)
    await make_config(kflare, "config")
    await kflare.ready("TunnelConfiguration", "config", reason="Synced")
    version = configuration(fresh_emulator, tunnel_id)["version"]
    path = rf"/cfd_tunnel/{tunnel_id}/configurations$"
    fresh_emulator.clear_calls()

    async def drift_checked() -> bool:
        return len(fresh_emulator.calls(method="GET", path=path)) >= 3  # drift checks every 2 s

    await eventually(drift_checked, timeout=30, what="drift checks of the configuration")
    assert fresh_emulator.calls(method="PUT") == []
    assert [c for c in fresh_emulator.calls() if c["method"] != "GET"] == []
    assert configuration(fresh_emulator, tunnel_id)["version"] == version

    # Changed in Cloudflare (the dashboard, another tool): put back as the spec says.
    rules = [{"hostname": "evil.example.com", "service": "http://elsewhere:80"}, {"service": "http_status:503"}]
    cf(fresh_emulator, "PUT", f"/accounts/{fresh_emulator.account_id}/cfd_tunnel/{tunnel_id}/configurations",
       json={"config": {"ingress": rules}})  # fmt: skip

    async def corrected() -> bool:
        ingress = configuration(fresh_emulator, tunnel_id)["config"]["ingress"]
        assert ingress == [{"hostname": "app.example.com", "service": SERVICE}, {"service": "http_status:404"}]
        # The status is written after the correction: wait for it rather than race it.
        status = (await kflare.get("TunnelConfiguration", "config"))["status"]["cloudflareMetadata"]
        return bool(status["version"] > version)

    await eventually(corrected, timeout=30, what="the configuration to be corrected and its status to follow")
    status = (await kflare.get("TunnelConfiguration", "config"))["status"]["cloudflareMetadata"]
    assert status["version"] == version + 2  # the outside write, then kflare's one correction
    assert configuration(fresh_emulator, tunnel_id)["version"] == version + 2


async def test_a_tunnel_deleted_in_cloudflare_is_recreated_and_its_record_and_configuration_follow(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    zone_id = await kflare.ready_zone()
    old_id = await make_tunnel(kflare)
    await make_config(kflare, "config")
    await kflare.make_record("app", "zone", name="app.example.com", type="CNAME", tunnelRef={"name": "tunnel"})
    await kflare.ready("DNSRecord", "app")
    await kflare.ready("TunnelConfiguration", "config", reason="Synced")

    cf(fresh_emulator, "DELETE", f"/accounts/{fresh_emulator.account_id}/cfd_tunnel/{old_id}")

    async def new_tunnel() -> str:
        tunnel = await kflare.get("Tunnel", "tunnel")
        tunnel_id = str(tunnel["status"]["cloudflareMetadata"]["tunnelID"])
        assert tunnel_id != old_id
        return tunnel_id

    new_id = await eventually(new_tunnel, timeout=30, what="the tunnel to be recreated")

    async def followed() -> bool:
        (record,) = cf(fresh_emulator, "GET", f"/zones/{zone_id}/dns_records", params={"name": "app.example.com"})
        assert record["content"] == f"{new_id}.cfargotunnel.com"
        assert configuration(fresh_emulator, new_id)["config"]["ingress"][0]["service"] == SERVICE
        secret = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
        assert token_payload(secret)["t"] == new_id
        return True

    await eventually(followed, timeout=30, what="the record, configuration and token to follow the tunnel")
    assert [t["id"] for t in tunnels(fresh_emulator, is_deleted="false")] == [new_id]


@pytest.mark.parametrize("tunnel_first", [True, False])
async def test_deletion_in_any_order(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess, tunnel_first: bool
) -> None:
    zone_id = await kflare.ready_zone()
    tunnel_id = await make_tunnel(kflare)
    await make_config(kflare, "config")
    await kflare.make_record("app", "zone", name="app.example.com", type="CNAME", tunnelRef={"name": "tunnel"})
    await kflare.ready("DNSRecord", "app")
    await kflare.ready("TunnelConfiguration", "config", reason="Synced")
    fresh_emulator.connect_tunnel(tunnel_id)  # a running cloudflared: deletion disconnects it

    order = ["Tunnel", "TunnelConfiguration", "DNSRecord"] if tunnel_first else ["DNSRecord", "TunnelConfiguration"]
    names = {"Tunnel": "tunnel", "TunnelConfiguration": "config", "DNSRecord": "app"}
    for kind in order:
        await kflare.delete(kind, names[kind])
    if tunnel_first:
        waiting = await kflare.ready("Tunnel", "tunnel", status="False", reason="InUse")
        message = waiting["status"]["conditions"][0]["message"]
        # It names what it waits for: both dependants, or the one left when the other's deletion finished first.
        assert "TunnelConfiguration" in message or "DNSRecord" in message, message
    else:
        await kflare.gone("DNSRecord", "app")
        await kflare.gone("TunnelConfiguration", "config")
        await kflare.delete("Tunnel", "tunnel")
    for kind in ("DNSRecord", "TunnelConfiguration", "Tunnel"):
        await kflare.gone(kind, names[kind])

    assert cf(fresh_emulator, "GET", f"/zones/{zone_id}/dns_records", params={"name": "app.example.com"}) == []
    held = cf(fresh_emulator, "GET", f"/accounts/{fresh_emulator.account_id}/cfd_tunnel/{tunnel_id}")
    assert held["deleted_at"] is not None  # soft-deleted, its connector gone with it
    assert tunnels(fresh_emulator, is_deleted="false") == []


async def test_a_tunnel_is_renamed_in_place(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    tunnel_id = await make_tunnel(kflare)
    await kflare.patch("Tunnel", "tunnel", {"spec": {"name": "renamed"}})
    await kflare.ready("Tunnel", "tunnel", reason="Synced")
    assert [(t["id"], t["name"]) for t in tunnels(fresh_emulator, is_deleted="false")] == [(tunnel_id, "renamed")]


async def test_adopting_a_tunnel_says_which_one_was_taken(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    name = f"{kflare.namespace}-tunnel"
    base = f"/accounts/{fresh_emulator.account_id}/cfd_tunnel"
    deleted = cf(fresh_emulator, "POST", base, json={"name": name, "config_src": "cloudflare"})["id"]
    cf(fresh_emulator, "DELETE", f"{base}/{deleted}")
    live = cf(fresh_emulator, "POST", base, json={"name": name, "config_src": "cloudflare"})["id"]
    assert await make_tunnel(kflare, **{"kflare.dev/adoption-policy": "adopt"}) == live

    async def adopted_event() -> str:
        events = await client.EventsV1Api(kflare.api).list_namespaced_event(kflare.namespace)
        notes = [e.note for e in events.items if e.reason == "Adopted" and e.regarding.name == "tunnel"]
        assert notes, [e.reason for e in events.items]
        return str(notes[0])

    note = await eventually(adopted_event, what="the adoption Event")
    assert live in note
    assert deleted not in note
    assert "deleted tunnels" in note


async def test_admission_refuses_what_cloudflare_would(kflare: Kflare, kflare_crds: None) -> None:
    """The CRD's schema and CEL alone (no webhook here): the webhook's own checks are in the unit tests."""
    spec = {"tunnelRef": {"name": "t"}, "ingress": []}
    with pytest.raises(ApiException) as refused:
        await kflare.apply({"kind": "TunnelConfiguration", "metadata": {"name": "bad"}, "spec": spec})
    assert refused.value.status == 422
    assert "ingress" in str(refused.value.body)


async def test_drift_rounds_read_no_token_and_a_secret_deleted_or_edited_gets_it_back(
    controller: ControllerProcess, kflare: Kflare, fresh_emulator: EmulatorProcess
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    tunnel_id = await make_tunnel(kflare)
    await make_config(kflare, "config")
    await kflare.ready("TunnelConfiguration", "config")
    listing = rf"/accounts/{fresh_emulator.account_id}/cfd_tunnel$"
    token_path = rf"/cfd_tunnel/{tunnel_id}/token$"

    async def holds_the_token() -> client.V1Secret:
        secret = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
        assert token_payload(secret)["t"] == tunnel_id
        assert secret.metadata.owner_references[0].name == "tunnel"
        assert (secret.metadata.annotations or {}).get("kflare.dev/token-digest", "").startswith("sha256:")
        return secret

    before = await eventually(holds_the_token, what="the token Secret")
    await kflare.ready("Tunnel", "tunnel", reason="Synced")

    # Drift rounds (every 2 s): the tunnel's share of the account's listing and its configuration's GET, no token.
    fresh_emulator.clear_calls()

    async def rounds(count: int) -> bool:
        return len(fresh_emulator.calls(method="GET", path=listing)) >= count

    await eventually(lambda: rounds(4), timeout=30, what="four drift rounds of the tunnel")
    seen = fresh_emulator.calls()
    done = sum(1 for c in seen if c["method"] == "GET" and c["path"].endswith("/cfd_tunnel"))
    about_the_tunnel = [f"{c['method']} {c['path']}" for c in seen if f"/cfd_tunnel/{tunnel_id}" in c["path"]]
    assert not [c for c in about_the_tunnel if c.endswith("/token")], about_the_tunnel
    assert all(c.startswith("GET ") and c.endswith("/configurations") for c in about_the_tunnel), about_the_tunnel
    assert len(about_the_tunnel) <= done + 1, about_the_tunnel  # one configuration GET a round
    assert [c for c in seen if c["method"] != "GET"] == []
    unchanged = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
    assert unchanged.metadata.resource_version == before.metadata.resource_version

    # Deleted: made again with the token, read from Cloudflare once more.
    fresh_emulator.clear_calls()
    await kflare.core.delete_namespaced_secret("tok", kflare.namespace)
    restored = await eventually(holds_the_token, timeout=30, what="the deleted token Secret to be made again")
    assert restored.metadata.uid != before.metadata.uid
    assert restored.data == before.data
    assert fresh_emulator.calls(method="GET", path=token_path)

    # Edited by hand: the token is put back.
    await kflare.core.patch_namespaced_secret("tok", kflare.namespace, {"data": {"TUNNEL_TOKEN": "ZWRpdGVk"}})

    async def put_back() -> bool:
        secret = await holds_the_token()
        assert secret.data == before.data
        return True

    await eventually(put_back, timeout=30, what="the edited token to be put back")

    # Its digest edited away: written again beside the same token.
    await kflare.core.patch_namespaced_secret(
        "tok", kflare.namespace, {"metadata": {"annotations": {"kflare.dev/token-digest": None}}}
    )
    await eventually(put_back, timeout=30, what="the digest to be written again")

    # The token is a credential: not in the Tunnel's status, the namespace's Events or the controller's log.
    encoded = before.data["TUNNEL_TOKEN"]
    token = base64.b64decode(encoded).decode()
    tunnel = json.dumps(await kflare.get("Tunnel", "tunnel"))
    listed = await kflare.core.list_namespaced_event(kflare.namespace)
    events = json.dumps(kflare.api.sanitize_for_serialization(listed))
    for where, text in (("status", tunnel), ("Events", events), ("log", controller.log())):
        assert token not in text, where
        assert encoded not in text, where


async def test_a_new_process_reads_no_token_for_a_secret_as_kflare_left_it(
    control_plane: ControlPlane,
    controller: ControllerProcess,
    kflare: Kflare,
    fresh_emulator: EmulatorProcess,
    tmp_path: Path,
) -> None:
    await kflare.token_secret()
    await kflare.make_account()
    tunnel_id = await make_tunnel(kflare)

    async def holds_the_token() -> client.V1Secret:
        secret = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
        assert token_payload(secret)["t"] == tunnel_id
        return secret

    before = await eventually(holds_the_token, what="the token Secret")
    controller.stop()
    fresh_emulator.clear_calls()
    with controller_process(control_plane, fresh_emulator, tmp_path, "--drift-check-interval=2s"):
        listing = rf"/accounts/{fresh_emulator.account_id}/cfd_tunnel$"

        async def rounds(count: int) -> bool:
            return len(fresh_emulator.calls(method="GET", path=listing)) >= count

        # The first listing is the new process's reconcile of the Tunnel; the next ones its drift checks.
        await eventually(lambda: rounds(3), timeout=30, what="the new process to reconcile and check the tunnel")
        assert fresh_emulator.calls(path=rf"/cfd_tunnel/{tunnel_id}/token$") == []
        after = await kflare.core.read_namespaced_secret("tok", kflare.namespace)
        assert after.metadata.resource_version == before.metadata.resource_version
        await kflare.cleanup()  # while a controller runs to release what the test made
