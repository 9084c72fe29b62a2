"""Cloudflare Tunnels through the official SDK: soft deletion, names among live tunnels, tokens, simulated
connectors and remote configurations with versions and the catch-all rule."""

from __future__ import annotations

import base64
import json
from typing import Any

import cloudflare
import httpx
import pytest
from cloudflare.types.shared import CloudflareTunnel

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorError, EmulatorProcess

CATCH_ALL = {"service": "http_status:404"}
# The SDK's model wants a hostname on every rule; "*" is the catch-all's spelling that has one.
STAR = {"hostname": "*", "service": "http_status:404"}


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


def tunnels(cf: cloudflare.Cloudflare) -> Any:
    return cf.zero_trust.tunnels.cloudflared


def test_create_get_rename_and_token(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    created = tunnels(cf).create(account_id=account, name="edge", config_src="cloudflare")
    assert isinstance(created, CloudflareTunnel)
    conforms(created)
    assert (created.name, created.status, created.remote_config, created.deleted_at) == ("edge", "inactive", True, None)
    assert created.id is not None
    token = tunnels(cf).token.get(tunnel_id=created.id, account_id=account)
    decoded = json.loads(base64.b64decode(token))
    assert (decoded["a"], decoded["t"]) == (account, created.id)
    assert len(base64.b64decode(decoded["s"])) >= 32
    raw = tunnels(cf).with_raw_response.create(account_id=account, name="other").http_response.json()
    assert raw["result"]["token"], "the create answer carries the token"

    renamed = tunnels(cf).edit(tunnel_id=created.id, account_id=account, name="edge-2")
    assert renamed.name == "edge-2"
    assert tunnels(cf).get(tunnel_id=created.id, account_id=account).name == "edge-2"


def test_names_are_unique_among_live_tunnels(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    first = tunnels(cf).create(account_id=account, name="same")
    with pytest.raises(cloudflare.ConflictError) as duplicate:
        tunnels(cf).create(account_id=account, name="same")
    assert codes(duplicate.value) == [1013]
    deleted = tunnels(cf).delete(tunnel_id=first.id, account_id=account)
    conforms(deleted)
    assert deleted.deleted_at is not None
    second = tunnels(cf).create(account_id=account, name="same")
    assert second.id != first.id

    # Deletion is soft: the deleted tunnel still answers, and lists show it unless asked not to.
    assert tunnels(cf).get(tunnel_id=first.id, account_id=account).deleted_at is not None
    assert {t.id for t in tunnels(cf).list(account_id=account)} == {first.id, second.id}
    assert [t.id for t in tunnels(cf).list(account_id=account, is_deleted=False)] == [second.id]
    assert [t.id for t in tunnels(cf).list(account_id=account, is_deleted=True)] == [first.id]
    assert [t.id for t in tunnels(cf).list(account_id=account, name="same", is_deleted=False)] == [second.id]


def test_connectors_health_and_deletion(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    tunnel = tunnels(cf).create(account_id=account, name="edge", config_src="cloudflare")
    client_id = fresh_emulator.connect_tunnel(tunnel.id, connections=2)
    healthy = tunnels(cf).get(tunnel_id=tunnel.id, account_id=account)
    assert (healthy.status, len(healthy.connections or [])) == ("healthy", 2)
    assert healthy.conns_active_at is not None
    clients = list(tunnels(cf).connections.get(tunnel_id=tunnel.id, account_id=account))
    assert [c.id for c in clients] == [client_id]
    for client in clients:
        conforms(client)
    assert len(clients[0].conns or []) == 2

    with pytest.raises(cloudflare.BadRequestError) as busy:
        tunnels(cf).delete(tunnel_id=tunnel.id, account_id=account)
    assert codes(busy.value) == [1022]
    tunnels(cf).connections.delete(tunnel_id=tunnel.id, account_id=account)
    down = tunnels(cf).get(tunnel_id=tunnel.id, account_id=account)
    assert (down.status, down.connections) == ("down", [])
    assert down.conns_inactive_at is not None
    assert tunnels(cf).delete(tunnel_id=tunnel.id, account_id=account).deleted_at is not None


def test_a_failed_connection_degrades_the_tunnel(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    tunnel = tunnels(cf).create(account_id=account, name="edge", config_src="cloudflare")
    fresh_emulator.connect_tunnel(tunnel.id, connections=4, failed=1)
    degraded = tunnels(cf).get(tunnel_id=tunnel.id, account_id=account)
    assert degraded.status == "degraded"
    assert [c.is_pending_reconnect for c in degraded.connections or []] == [True, False, False, False]
    fresh_emulator.connect_tunnel(tunnel.id, connections=4)
    assert tunnels(cf).get(tunnel_id=tunnel.id, account_id=account).status == "degraded"  # still one failing
    tunnels(cf).connections.delete(tunnel_id=tunnel.id, account_id=account)
    assert tunnels(cf).get(tunnel_id=tunnel.id, account_id=account).status == "down"


def test_cascade_and_connector_leaving(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    tunnel = tunnels(cf).create(account_id=account, name="edge")
    first = fresh_emulator.connect_tunnel(tunnel.id)
    fresh_emulator.connect_tunnel(tunnel.id)
    fresh_emulator.disconnect_tunnel(tunnel.id, first)
    assert tunnels(cf).get(tunnel_id=tunnel.id, account_id=account).status == "healthy"
    with pytest.raises(EmulatorError):
        fresh_emulator.disconnect_tunnel(tunnel.id, first)
    headers = {"Authorization": f"Bearer {fresh_emulator.token}"}
    gone = httpx.delete(
        f"{fresh_emulator.base_url}/accounts/{account}/cfd_tunnel/{tunnel.id}",
        params={"cascade": "true"},
        headers=headers,
    )
    assert gone.json()["result"]["deleted_at"] is not None


def test_configuration_versions_and_the_catch_all(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    tunnel = tunnels(cf).create(account_id=account, name="edge", config_src="cloudflare")
    before = tunnels(cf).configurations.get(tunnel_id=tunnel.id, account_id=account)
    assert before is not None
    assert (before.version, before.config) == (0, None)

    ingress = [
        {"hostname": "app.example.com", "service": "http://web.default.svc:80", "originRequest": {"noTLSVerify": True}},
        {"hostname": "*.example.com", "path": "^/api/.*", "service": "https://api.default.svc:443"},
        STAR,
    ]
    first = tunnels(cf).configurations.update(tunnel_id=tunnel.id, account_id=account, config={"ingress": ingress})
    assert first is not None
    conforms(first)
    assert (first.version, first.source, first.tunnel_id) == (1, "cloudflare", tunnel.id)
    second = tunnels(cf).configurations.update(tunnel_id=tunnel.id, account_id=account, config={"ingress": [CATCH_ALL]})
    assert second is not None
    assert second.version == 2
    read = tunnels(cf).configurations.get(tunnel_id=tunnel.id, account_id=account)
    assert read is not None
    assert read.config is not None
    assert [r.to_dict() for r in read.config.ingress or []] == [CATCH_ALL], "rules are kept as sent"

    fresh_emulator.connect_tunnel(tunnel.id)
    client = next(iter(tunnels(cf).connections.get(tunnel_id=tunnel.id, account_id=account)))
    assert client.config_version == 2

    # The edge's own read for its connectors: the API's document, spending none of the account's budget.
    spent = fresh_emulator.rate_limit_state()
    edge = fresh_emulator.tunnel_configuration(tunnel.id)
    assert (edge["version"], edge["config"], edge["tunnel_id"]) == (2, {"ingress": [CATCH_ALL]}, tunnel.id)
    assert fresh_emulator.rate_limit_state() == spent


@pytest.mark.parametrize(
    "ingress",
    [
        [],
        [{"hostname": "app.example.com", "service": "http://web:80"}],
        [CATCH_ALL, {"hostname": "app.example.com", "service": "http://web:80"}],
        [{"hostname": "app.example.com", "service": "ftp://web"}, CATCH_ALL],
        [{"hostname": "bad_host!.example.com", "service": "http://web:80"}, CATCH_ALL],
        [{"hostname": "app.example.com", "path": "([", "service": "http://web:80"}, CATCH_ALL],
    ],
)
def test_refused_configurations(
    cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess, ingress: list[dict[str, Any]]
) -> None:
    tunnel = tunnels(cf).create(account_id=fresh_emulator.account_id, name="edge", config_src="cloudflare")
    with pytest.raises(cloudflare.BadRequestError) as refused:
        tunnels(cf).configurations.update(
            tunnel_id=tunnel.id, account_id=fresh_emulator.account_id, config={"ingress": ingress}
        )
    assert codes(refused.value) == [1055]


def test_refusals_and_permissions(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    with pytest.raises(cloudflare.NotFoundError):
        tunnels(cf).get(tunnel_id="00000000-0000-4000-8000-000000000000", account_id=account)
    with pytest.raises(cloudflare.BadRequestError):
        tunnels(cf).create(account_id=account, name="weak", tunnel_secret=base64.b64encode(b"short").decode())
    reader = fresh_emulator.client(fresh_emulator.add_token(["tunnels:read"])["value"])
    assert list(tunnels(reader).list(account_id=account)) == []
    with pytest.raises(cloudflare.PermissionDeniedError):
        tunnels(reader).create(account_id=account, name="nope")


def test_dump_seeds_back(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    kept = tunnels(cf).create(account_id=account, name="kept", config_src="cloudflare")
    tunnels(cf).configurations.update(tunnel_id=kept.id, account_id=account, config={"ingress": [CATCH_ALL]})
    gone = tunnels(cf).create(account_id=account, name="gone")
    tunnels(cf).delete(tunnel_id=gone.id, account_id=account)
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump
    assert tunnels(cf).token.get(tunnel_id=kept.id, account_id=account)
