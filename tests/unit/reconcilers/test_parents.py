"""A resource's parents in the dependency index are derived from its model's references (`app.api.links`): the
edges every sample manifest gets, written out, as the reconcilers' own code drew them before the model declared them.
"""

from __future__ import annotations

import collections
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api.links import reference_fields
from app.api.refs import BoundObjectReference
from app.api.registry import KINDS, kind_for
from app.api.workers import WorkerBinding
from reconcilers.managed_kind import parents_of
from reconcilers.registry import reconciler_of
from tests import kinds as kind_samples
from tests.unit.api import samples

ROOT = Path(__file__).resolve().parents[3]
Edge = tuple[str, str, str]


def _manifests() -> dict[str, dict[str, Any]]:
    """Every manifest of a kflare kind among the examples, the Go controller's samples and the lifecycle matrices'
    samples (their parents' IDs all one value), by where it comes from."""
    kinds = {model.info.kind for model in KINDS}
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document and document.get("kind") in kinds:
                meta = document["metadata"]
                found[f"{path.relative_to(ROOT)}:{document['kind']}/{meta['name']}"] = document
    for name, value in vars(samples).items():
        if name.isupper() and isinstance(value, str) and "kind:" in value:
            document = yaml.safe_load(value)
            if document.get("kind") in kinds:
                found[f"samples:{name}"] = document
    ctx: dict[str, Any] = collections.defaultdict(lambda: "ctx-value")
    matrices = [
        value()
        for value in vars(kind_samples).values()
        if isinstance(value, type) and issubclass(value, kind_samples.Sample) and "kind" in vars(value)
    ]
    for sample in [*matrices, *kind_samples.RULE_SAMPLES]:
        key = f"kinds:{sample.kind}"
        found.setdefault(key, {"kind": sample.kind, "metadata": {"name": sample.name}, "spec": sample.spec(ctx)})
    for document in found.values():
        if kind_for(document["kind"]).info.namespaced:
            document["metadata"].setdefault("namespace", "default")
    return found


EXPECTED: dict[str, list[Edge]] = {
    "examples/10-account.yaml:CloudflareAccount/demo-account": [("Secret", "kflare-system", "cloudflare-api-token")],
    "examples/15-team-account.yaml:Account/team-account": [("Secret", "demo", "team-cloudflare-token")],
    "examples/20-zone.yaml:Zone/example-com": [("CloudflareAccount", "", "demo-account")],
    "examples/30-dns-records.yaml:DNSRecord/www": [("Zone", "demo", "example-com")],
    "examples/30-dns-records.yaml:DNSRecord/api": [("Zone", "demo", "example-com")],
    "examples/30-dns-records.yaml:DNSRecord/mx-primary": [("Zone", "demo", "example-com")],
    "examples/30-dns-records.yaml:DNSRecord/mx-backup": [("Zone", "demo", "example-com")],
    "examples/30-dns-records.yaml:DNSRecord/spf": [("Zone", "demo", "example-com")],
    "examples/30-dns-records.yaml:DNSRecord/sip-srv": [("Zone", "demo", "example-com")],
    "examples/30-dns-records.yaml:DNSRecord/caa": [("Zone", "demo", "example-com")],
    "examples/35-ip-list.yaml:IPList/office-networks": [("CloudflareAccount", "", "demo-account")],
    "examples/40-rules.yaml:WAFCustomRule/block-admin": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:RateLimitRule/login": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:ManagedRuleset/free-managed": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:TransformRule/old-api": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:TransformRule/security-headers": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:RedirectRule/www-to-apex": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:CacheRule/static-assets": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:ConfigurationRule/api-settings": [("Zone", "demo", "example-com")],
    "examples/40-rules.yaml:OriginRule/admin-port": [("Zone", "demo", "example-com")],
    "examples/40-worker.yaml:KVNamespace/api-cache": [("CloudflareAccount", "", "demo-account")],
    "examples/40-worker.yaml:R2Bucket/api-assets": [("CloudflareAccount", "", "demo-account")],
    "examples/40-worker.yaml:D1Database/api-db": [("CloudflareAccount", "", "demo-account")],
    "examples/40-worker.yaml:WorkerScript/api": [
        ("CloudflareAccount", "", "demo-account"),
        ("ConfigMap", "demo", "api-code"),
        ("Secret", "demo", "api-secrets"),
        ("KVNamespace", "demo", "api-cache"),
        ("R2Bucket", "demo", "api-assets"),
        ("D1Database", "demo", "api-db"),
    ],
    "examples/40-worker.yaml:WorkerRoute/api": [("Zone", "demo", "example-com"), ("WorkerScript", "demo", "api")],
    "examples/50-managed-transform.yaml:ManagedTransform/example-com": [("Zone", "demo", "example-com")],
    "examples/expose-a-service/10-zone.yaml:Zone/example-net": [("CloudflareAccount", "", "demo-account")],
    "examples/expose-a-service/20-tunnel.yaml:Tunnel/web": [
        ("CloudflareAccount", "", "demo-account"),
        ("Secret", "web", "web-tunnel-token"),
    ],
    "examples/expose-a-service/20-tunnel.yaml:TunnelConfiguration/web": [("Tunnel", "web", "web")],
    "examples/expose-a-service/20-tunnel.yaml:DNSRecord/app": [
        ("Zone", "web", "example-net"),
        ("Tunnel", "web", "web"),
    ],
    "examples/gateway/10-tunnel.yaml:Tunnel/gateway": [
        ("CloudflareAccount", "", "demo-account"),
        ("Secret", "demo", "gateway-tunnel-token"),
    ],
    "samples:ACCOUNT": [("Secret", "kflare-system", "cloudflare-token")],
    "samples:ACCOUNT_WITH_KEY": [("Secret", "team-a", "team-token")],
    "samples:ZONE": [("CloudflareAccount", "", "my-account")],
    "samples:ZONE_PLAN": [("CloudflareAccount", "", "my-account")],
    "samples:RECORD_A": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_AAAA": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_CNAME": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_MX": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_TXT": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_SRV": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_CAA": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_URI": [("Zone", "my-namespace", "example-com")],
    "samples:RECORD_TUNNEL": [("Zone", "my-namespace", "example-com"), ("Tunnel", "my-namespace", "my-tunnel")],
    "samples:RECORD_WILDCARD": [("Zone", "my-namespace", "example-com")],
    "samples:WORKER": [
        ("CloudflareAccount", "", "my-account"),
        ("Secret", "my-namespace", "api-secrets"),
        ("KVNamespace", "my-namespace", "cache"),
        ("R2Bucket", "my-namespace", "assets"),
    ],
    "samples:WORKER_CONFIGMAP": [
        ("CloudflareAccount", "", "my-account"),
        ("ConfigMap", "my-namespace", "legacy-worker-code"),
    ],
    "samples:ROUTE": [("Zone", "my-namespace", "example-com"), ("WorkerScript", "my-namespace", "api")],
    "samples:ROUTE_EXCLUSION": [("Zone", "my-namespace", "example-com")],
    "samples:KV": [("CloudflareAccount", "", "my-account")],
    "samples:R2": [("CloudflareAccount", "", "my-account")],
    "samples:D1": [("CloudflareAccount", "", "my-account")],
    "samples:TUNNEL": [("CloudflareAccount", "", "my-account"), ("Secret", "default", "web-tunnel-token")],
    "samples:TUNNEL_CONFIGURATION": [("Tunnel", "default", "web")],
    "kinds:Zone": [("CloudflareAccount", "", "acct")],
    "kinds:DNSRecord": [("Zone", "default", "zone")],
    "kinds:KVNamespace": [("CloudflareAccount", "", "ctx-value")],
    "kinds:R2Bucket": [("CloudflareAccount", "", "ctx-value")],
    "kinds:D1Database": [("CloudflareAccount", "", "ctx-value")],
    "kinds:WorkerScript": [("CloudflareAccount", "", "ctx-value")],
    "kinds:WorkerRoute": [("Zone", "default", "zone"), ("WorkerScript", "default", "worker")],
    "kinds:Tunnel": [("CloudflareAccount", "", "ctx-value"), ("Secret", "default", "tok")],
    "kinds:TunnelConfiguration": [("Tunnel", "default", "tunnel")],
    "kinds:ManagedTransform": [("Zone", "default", "zone")],
    "kinds:IPList": [("CloudflareAccount", "", "ctx-value")],
    "kinds:WAFCustomRule": [("Zone", "default", "zone")],
    "kinds:RateLimitRule": [("Zone", "default", "zone")],
    "kinds:ManagedRuleset": [("Zone", "default", "zone")],
    "kinds:TransformRule": [("Zone", "default", "zone")],
    "kinds:RedirectRule": [("Zone", "default", "zone")],
    "kinds:CacheRule": [("Zone", "default", "zone")],
    "kinds:ConfigurationRule": [("Zone", "default", "zone")],
    "kinds:OriginRule": [("Zone", "default", "zone")],
}

# what no sample shows: a binding in another namespace (its Grants are parents too), a Tunnel whose token moves to
# another Secret, a Zone in another namespace, an Account of the namespace, references left out
EXTRA: list[tuple[str, dict[str, Any]]] = [
    (
        "worker-cross-namespace",
        {
            "kind": "WorkerScript",
            "metadata": {"name": "w", "namespace": "team-a"},
            "spec": {
                "accountRef": {"name": "team", "kind": "Account"},
                "scriptConfigMapRef": {"name": "code", "key": "index.js"},
                "bindings": [
                    {"name": "S", "type": "secret_text", "secretKeyRef": {"name": "s", "key": "k"}},
                    {"name": "KV", "type": "kv_namespace", "kvNamespaceRef": {"name": "kv", "namespace": "shared"}},
                    {"name": "R2", "type": "r2_bucket", "r2BucketRef": {"name": "bucket"}},
                    {"name": "D1", "type": "d1", "d1DatabaseRef": {"name": "db", "namespace": "team-a"}},
                    {"name": "D2", "type": "d1", "d1DatabaseRef": {"name": "db2", "namespace": "other"}},
                ],
            },
        },
    ),
    (
        "tunnel-previous-secret",
        {
            "kind": "Tunnel",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"accountRef": {"name": "acct"}, "credentialsSecretRef": {"name": "new"}},
            "status": {"credentialsSecretName": "old"},
        },
    ),
    (
        "tunnel-same-secret",
        {
            "kind": "Tunnel",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {"accountRef": {"name": "acct"}, "credentialsSecretRef": {"name": "same"}},
            "status": {"credentialsSecretName": "same"},
        },
    ),
    (
        "record-other-zone-namespace",
        {
            "kind": "DNSRecord",
            "metadata": {"name": "r", "namespace": "team"},
            "spec": {"zoneRef": {"name": "z", "namespace": "infra"}, "tunnelRef": {"name": "t"}},
        },
    ),
    (
        "route-without-script",
        {"kind": "WorkerRoute", "metadata": {"name": "r", "namespace": "ns"}, "spec": {"zoneRef": {"name": "z"}}},
    ),
    (
        "zone-team-account",
        {
            "kind": "Zone",
            "metadata": {"name": "z", "namespace": "team"},
            "spec": {"accountRef": {"name": "a", "kind": "Account"}},
        },
    ),
    ("empty-spec", {"kind": "DNSRecord", "metadata": {"name": "r", "namespace": "ns"}, "spec": {}}),
    ("no-spec", {"kind": "WorkerScript", "metadata": {"name": "w", "namespace": "ns"}}),
]

EXPECTED_EXTRA: dict[str, list[Edge]] = {
    "worker-cross-namespace": [
        ("Account", "team-a", "team"),
        ("ConfigMap", "team-a", "code"),
        ("Secret", "team-a", "s"),
        ("KVNamespace", "shared", "kv"),
        ("Grant", "shared", ""),
        ("R2Bucket", "team-a", "bucket"),
        ("D1Database", "team-a", "db"),
        ("D1Database", "other", "db2"),
        ("Grant", "other", ""),
    ],
    "tunnel-previous-secret": [("CloudflareAccount", "", "acct"), ("Secret", "ns", "new"), ("Secret", "ns", "old")],
    "tunnel-same-secret": [("CloudflareAccount", "", "acct"), ("Secret", "ns", "same")],
    "record-other-zone-namespace": [("Zone", "infra", "z"), ("Tunnel", "team", "t")],
    "route-without-script": [("Zone", "ns", "z")],
    "zone-team-account": [("Account", "team", "a")],
    "empty-spec": [],
    "no-spec": [],
}

MANIFESTS = _manifests()


def test_every_sample_has_its_edges_written_out() -> None:
    assert sorted(MANIFESTS) == sorted(EXPECTED)


@pytest.mark.parametrize("where", sorted(EXPECTED))
def test_the_parents_of_a_sample_are_derived_from_its_model(where: str) -> None:
    raw = copy.deepcopy(MANIFESTS[where])
    assert [tuple(p) for p in parents_of(reconciler_of(raw["kind"]), raw)] == EXPECTED[where]


@pytest.mark.parametrize(("where", "raw"), EXTRA, ids=[where for where, _ in EXTRA])
def test_unusual_references_are_derived_too(where: str, raw: dict[str, Any]) -> None:
    assert [tuple(p) for p in parents_of(reconciler_of(raw["kind"]), raw)] == EXPECTED_EXTRA[where]


def test_the_bound_kinds_of_a_binding_are_its_model_s() -> None:
    assert reference_fields(WorkerBinding, BoundObjectReference) == {
        "kv_namespace_ref": "KVNamespace",
        "r2_bucket_ref": "R2Bucket",
        "d1_database_ref": "D1Database",
    }
