"""Golden files of the translation: `testdata/<case>.in.yaml` (the objects the caches hold) to `<case>.out.yaml` (the
statuses, the hostnames published and every data plane's xDS resources), read by a reviewer instead of the code.

An input is a YAML stream of Kubernetes objects as the API server holds them (GatewayClass, Gateway, ListenerSet,
HTTPRoute, GRPCRoute, Service, EndpointSlice, ReferenceGrant, BackendTLSPolicy, Secret, ConfigMap, Namespace, Zone),
plus two documents of this test's own:

- `kind: Tunnel` (metadata namespace and name, `status: {ready, message, address}`): the kflare Tunnel's state as
  the class reads it (`TunnelState`);
- `kind: World`: the translation's settings (`tenancyLabel`, `allowExternalNameServices`, `installedBundle`,
  `installedChannel`, `everyGatewayOwnPlane`) and `planes`, the Gateways (`namespace/name`) given a plane of their
  own (`{uid, parameters, token}`) or refused one (the refusal's message).

A Secret's `stringData` is read as its `data` (base64-encoded here), so that a certificate reads as PEM.

Each case is translated once from scratch and twice more as the controller does (with cache revisions, so the
second one replays the per-route builds of the first): all three must give the golden output. After an intended
change, regenerate the outputs and read their diff:

    KFLARE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/gateway/test_golden.py -q
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcilers.gateway.planes import Choice, Plane
from reconcilers.gateway.translate import Translation, TunnelState, World, translate

JSON = dict[str, Any]
TESTDATA = Path(__file__).parent / "testdata"
UPDATE = os.environ.get("KFLARE_UPDATE_GOLDEN") == "1"
CASES = sorted(p.name.removesuffix(".in.yaml") for p in TESTDATA.glob("*.in.yaml"))

_LISTS = {
    "GatewayClass": "classes",
    "Gateway": "gateways",
    "ListenerSet": "listener_sets",
    "HTTPRoute": "http_routes",
    "GRPCRoute": "grpc_routes",
    "Service": "services",
    "EndpointSlice": "slices",
    "ReferenceGrant": "grants",
    "BackendTLSPolicy": "backend_tls_policies",
    "Namespace": "namespaces",
    "Zone": "zones",
}
_SETTINGS = {
    "tenancyLabel": "tenancy_label",
    "allowExternalNameServices": "allow_external_name_services",
    "installedBundle": "installed_bundle",
    "installedChannel": "installed_channel",
    "everyGatewayOwnPlane": "every_gateway_own_plane",
}
_revisions = itertools.count()


def _key(obj: JSON) -> tuple[str, str]:
    return (str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"]))


def _choice(gateway: tuple[str, str], value: Any) -> Choice:
    if isinstance(value, str):
        return value
    token = value.get("token")
    return Plane(
        gateway, str(value.get("uid", "uid")), value.get("parameters") or {}, token=tuple(token) if token else None
    )


def load(case: str) -> World:
    """The World of `testdata/<case>.in.yaml`."""
    lists: dict[str, list[JSON]] = {field: [] for field in _LISTS.values()}
    secrets: dict[tuple[str, str], JSON] = {}
    config_maps: dict[tuple[str, str], JSON] = {}
    tunnels: dict[tuple[str, str], TunnelState] = {}
    settings: JSON = {}
    planes: dict[tuple[str, str], Choice] = {}
    text = (TESTDATA / f"{case}.in.yaml").read_text()
    for obj in yaml.safe_load_all(text):
        if obj is None:
            continue
        kind = obj["kind"]
        if kind in _LISTS:
            lists[_LISTS[kind]].append(obj)
        elif kind == "Secret":
            data = {k: base64.b64encode(v.encode()).decode() for k, v in obj.pop("stringData", {}).items()}
            obj["data"] = {**obj.get("data", {}), **data}
            secrets[_key(obj)] = obj
        elif kind == "ConfigMap":
            config_maps[_key(obj)] = obj
        elif kind == "Tunnel":
            status = obj.get("status") or {}
            tunnels[_key(obj)] = TunnelState(
                bool(status.get("ready")), status.get("message", ""), status.get("address")
            )
        elif kind == "World":
            settings = {_SETTINGS[k]: v for k, v in obj.items() if k in _SETTINGS}
            for name, value in (obj.get("planes") or {}).items():
                namespace, gateway = name.split("/")
                planes[(namespace, gateway)] = _choice((namespace, gateway), value)
        else:
            raise AssertionError(f"{case}: kind {kind} is not one this test reads")
    return World(
        **lists,  # type: ignore[arg-type]
        secret=lambda namespace, name: secrets.get((namespace, name)),
        config_map=lambda namespace, name: config_maps.get((namespace, name)),
        tunnel=lambda namespace, name: tunnels.get((namespace, name)),
        planes=planes,
        **settings,
    )


def _named(key: tuple[str, ...]) -> str:
    return "/".join(key) if len(key) == 2 else f"{key[0]} {'/'.join(key[1:])}"


def render(result: Translation) -> str:
    """The translation as YAML, every part in a stable order."""
    out: JSON = {
        "classes": dict(sorted(result.class_status.items())),
        "gateways": {_named(k): v for k, v in sorted(result.gateway_status.items())},
        "listenerSets": {_named(k): v for k, v in sorted(result.listener_set_status.items())},
        "routes": {_named(k): v for k, v in sorted(result.route_parents.items())},
        "policies": {_named(k): v for k, v in sorted(result.policy_ancestors.items())},
        "classesInUse": sorted(result.classes_in_use),
        "hostnames": [
            {
                "hostname": h.hostname,
                "grpc": h.grpc,
                "tunnel": _named(h.tunnel) if h.tunnel else None,
                "routes": [_named(r) for r in h.routes],
                "dns": h.dns,
            }
            for h in result.hostnames
        ],
        # The chains' PEM is the input's; which listener each SNI gets is what is decided.
        "httpsChains": {
            plane or "shared": [{"serverName": c.server_name, "listener": c.gateway} for c in chains]
            for plane, chains in sorted(result.https_chains.items())
        },
        "xds": {"shared": result.resources, **dict(sorted(result.planes.items()))},
    }
    return yaml.safe_dump(out, sort_keys=True, width=120, default_flow_style=False)


def _translations(case: str) -> Iterator[tuple[str, Translation]]:
    yield "from scratch", translate(load(case))
    # As the controller: a revision per cache content; the second translation is another revision of the same
    # objects, so each route's build is replayed rather than built again.
    resolver = ("golden", case, next(_revisions))
    for how in ("first revision", "second revision, builds replayed"):
        world = load(case)
        for obj in world.http_routes + world.grpc_routes:
            obj["metadata"].setdefault("resourceVersion", "1")
        world.revision, world.resolver_revision = ("golden", case, next(_revisions)), resolver
        yield how, translate(world)


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    golden = TESTDATA / f"{case}.out.yaml"
    outputs = [(how, render(result)) for how, result in _translations(case)]
    if UPDATE:
        golden.write_text(outputs[0][1])
    assert golden.exists(), f"{golden.name} is missing: KFLARE_UPDATE_GOLDEN=1 writes it"
    expected = golden.read_text()
    for how, rendered in outputs:
        assert rendered == expected, f"{case} ({how}) differs from {golden.name}"


def test_there_are_cases() -> None:
    assert len(CASES) >= 10
