"""What the tests need to know of each kind to drive it through the shared lifecycle: how to make its parents, a
manifest, an object of the same key made outside kflare, and how to read what Cloudflare holds of it.

Every kind the controller registers (but CloudflareAccount, which creates nothing) has a Sample here, and the
lifecycle matrices (`tests/unit/reconcilers/test_lifecycle_matrices.py`, in process) run over all of them, as does
one smoke test per kind through `kflare run` (`tests/integration/test_lifecycle_matrices.py`): a new kind gets the
adoption and deletion matrices by adding its Sample (a test fails until it does). A Sample drives kflare through a
`tests.fixtures.driver.Driver`, so the same description serves both.

Rules are never adopted: kflare finds its rule by the ref it derives from the resource, so a rule "that exists" is
one kflare made (before a move to a new cluster, say) and is taken as the resource's own, whatever the adoption
policy, with a created object's deletion policy. A rule kind's Sample says `adoptable = False`; the matrices then
expect exactly that, and the deletion matrix runs its rows for created objects.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from abc import ABC, abstractmethod
from typing import Any

import httpx

from reconcilers.rulesets import ref_for
from tests.fixtures.driver import CloudflareEndpoint, Driver

UPDATED_CODE = "export default { fetch() { return new Response('updated'); } };"
UPDATED_EXPRESSION = 'http.request.uri.path eq "/updated"'
UPDATED_SERVICE = "http://updated.default.svc:80"
HTTP = httpx.Client(timeout=10, trust_env=False)
"""One client for every call of the tests to the emulator: a client per call would build a TLS context each time,
which costs more than the call. The emulator is always local: no proxy of the environment applies."""


def cf(emulator: CloudflareEndpoint, method: str, path: str, **kwargs: Any) -> Any:
    """A call to the emulator as a Cloudflare user would make it (the test's token), its result unwrapped."""
    reply = cf_raw(emulator, method, path, **kwargs)
    body = reply.json()
    assert body["success"], body
    return body["result"]


class Sample(ABC):
    """One kind, as the lifecycle matrices drive it. `ctx` is whatever `parents` returned (IDs of the parents)."""

    kind: str
    name = "sample"
    adoptable = True
    """False for kinds whose key marks kflare's own objects (rules): found means ours, never adopted."""

    @abstractmethod
    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        """Make the resource's parents Ready (in a Cloudflare namespace of their own, `label`)."""

    @abstractmethod
    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        """The resource's spec."""

    @abstractmethod
    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        """An object of the resource's key, made in Cloudflare outside kflare, different from the spec where the
        kind has anything to correct; returns its ID."""

    @abstractmethod
    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        """What Cloudflare holds of the resource's key, each with its `id`."""

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        """Whether a held object is as the spec says (after adoption, drift is corrected)."""
        return True

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        """A spec patch of a field the kind changes in place (None: nothing changes in place)."""
        return None

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        """Whether a held object shows the `update` patch."""
        raise NotImplementedError(f"{self.kind} has no update")

    async def apply(self, kflare: Driver, ctx: dict[str, Any], annotations: dict[str, str]) -> None:
        await kflare.apply(
            {"kind": self.kind, "metadata": {"name": self.name, "annotations": annotations}, "spec": self.spec(ctx)}
        )


class ZoneSample(Sample):
    kind = "Zone"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        await kflare.token_secret()
        await kflare.make_account()
        await kflare.ready("CloudflareAccount", kflare.account)
        return {"domain": f"{label}.example", "account_id": kflare.account_id}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"name": ctx["domain"], "accountRef": {"name": "acct"}, "type": "full"}

    async def apply(self, kflare: Driver, ctx: dict[str, Any], annotations: dict[str, str]) -> None:
        await kflare.make_zone(self.name, ctx["domain"], annotations)

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        body = {"name": ctx["domain"], "account": {"id": ctx["account_id"]}, "type": "full"}
        return str(cf(emulator, "POST", "/zones", json=body)["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        return list(cf(emulator, "GET", "/zones", params={"name": ctx["domain"]}))


class DNSRecordSample(Sample):
    kind = "DNSRecord"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        domain = f"{label}.example"
        return {"zone_id": await kflare.ready_zone(domain), "host": f"app.{domain}"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"zoneRef": {"name": "zone"}, "name": ctx["host"], "type": "CNAME", "content": "new.example.net"}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        body = {"type": "CNAME", "name": ctx["host"], "content": "old.example.net", "ttl": 1}
        return str(cf(emulator, "POST", f"/zones/{ctx['zone_id']}/dns_records", json=body)["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        params = {"type": "CNAME", "name": ctx["host"]}
        return list(cf(emulator, "GET", f"/zones/{ctx['zone_id']}/dns_records", params=params))

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("content") == "new.example.net")

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        return {"content": "updated.example.net"}

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("content") == "updated.example.net")


async def ready_account(kflare: Driver) -> dict[str, Any]:
    await kflare.token_secret()
    await kflare.make_account()
    await kflare.ready("CloudflareAccount", kflare.account)
    account_id = kflare.account_id
    return {
        "account": kflare.account,
        "account_id": account_id,
        "base": f"/accounts/{account_id}",
        "emulator": kflare.emulator,
    }


class KVNamespaceSample(Sample):
    kind = "KVNamespace"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        return {**await ready_account(kflare), "title": f"{label}-cache"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"accountRef": {"name": ctx["account"]}, "title": ctx["title"]}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        path = f"{ctx['base']}/storage/kv/namespaces"
        return str(cf(emulator, "POST", path, json={"title": ctx["title"]})["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        found = cf(emulator, "GET", f"{ctx['base']}/storage/kv/namespaces", params={"per_page": 1000})
        return [n for n in found if n["title"] == ctx["title"]]


class R2BucketSample(Sample):
    kind = "R2Bucket"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        return {**await ready_account(kflare), "bucket": f"{label}-bucket"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"accountRef": {"name": ctx["account"]}, "name": ctx["bucket"], "locationHint": "weur"}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        return str(cf(emulator, "POST", f"{ctx['base']}/r2/buckets", json={"name": ctx["bucket"]})["name"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        found = cf(emulator, "GET", f"{ctx['base']}/r2/buckets", params={"per_page": 1000})["buckets"]
        return [{**b, "id": b["name"]} for b in found if b["name"] == ctx["bucket"]]


class D1DatabaseSample(Sample):
    kind = "D1Database"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        return {**await ready_account(kflare), "database": f"{label}-db"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"accountRef": {"name": ctx["account"]}, "name": ctx["database"]}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        return str(cf(emulator, "POST", f"{ctx['base']}/d1/database", json={"name": ctx["database"]})["uuid"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        found = cf(emulator, "GET", f"{ctx['base']}/d1/database")
        return [{**d, "id": d["uuid"]} for d in found if d["name"] == ctx["database"]]


def r2_buckets(emulator: CloudflareEndpoint, jurisdiction: str = "default") -> list[dict[str, Any]]:
    """The account's buckets of one jurisdiction."""
    reply = HTTP.get(
        f"{emulator.base_url}/accounts/{emulator.account_id}/r2/buckets",
        headers={"Authorization": f"Bearer {emulator.token}", "cf-r2-jurisdiction": jurisdiction},
    )
    buckets: list[dict[str, Any]] = reply.json()["result"]["buckets"]
    return buckets


def upload_worker(emulator: CloudflareEndpoint, account_id: str, name: str, code: str) -> dict[str, Any]:
    """A Worker uploaded as a user would (wrangler's multipart form), outside kflare."""
    metadata = json.dumps({"main_module": "index.js", "bindings": []})
    files = {
        "metadata": (None, metadata, "application/json"),
        "index.js": ("index.js", code, "application/javascript+module"),
    }
    result: dict[str, Any] = cf(emulator, "PUT", f"/accounts/{account_id}/workers/scripts/{name}", files=files)
    return result


def worker_code(emulator: CloudflareEndpoint, account_id: str, name: str) -> str:
    reply = HTTP.get(
        f"{emulator.base_url}/accounts/{account_id}/workers/scripts/{name}",
        headers={"Authorization": f"Bearer {emulator.token}"},
    )
    reply.raise_for_status()
    return reply.text


def workers(emulator: CloudflareEndpoint, account_id: str) -> dict[str, dict[str, Any]]:
    return {w["id"]: w for w in cf(emulator, "GET", f"/accounts/{account_id}/workers/scripts")}


NEW_CODE = "export default { fetch() { return new Response('kflare'); } };"


class WorkerScriptSample(Sample):
    kind = "WorkerScript"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        return {**await ready_account(kflare), "worker": f"{label}-worker"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"accountRef": {"name": ctx["account"]}, "name": ctx["worker"], "script": NEW_CODE}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        code = "export default { fetch() { return new Response('dashboard'); } };"
        return str(upload_worker(emulator, ctx["account_id"], ctx["worker"], code)["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        found = workers(emulator, ctx["account_id"]).get(ctx["worker"])
        return [] if found is None else [found]

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return "'kflare'" in worker_code(ctx["emulator"], ctx["account_id"], ctx["worker"])

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        return {"script": UPDATED_CODE}

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return "'updated'" in worker_code(ctx["emulator"], ctx["account_id"], ctx["worker"])


class WorkerRouteSample(Sample):
    kind = "WorkerRoute"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        domain = f"{label}.example"
        zone_id = await kflare.ready_zone(domain)
        await kflare.apply(
            {
                "kind": "WorkerScript",
                "metadata": {"name": "worker"},
                "spec": {"accountRef": {"name": kflare.account}, "name": f"{label}-worker", "script": NEW_CODE},
            }
        )
        await kflare.ready("WorkerScript", "worker")
        return {"zone_id": zone_id, "pattern": f"app.{domain}/*", "worker": f"{label}-worker"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"zoneRef": {"name": "zone"}, "pattern": ctx["pattern"], "workerScriptRef": {"name": "worker"}}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        path = f"/zones/{ctx['zone_id']}/workers/routes"
        return str(cf(emulator, "POST", path, json={"pattern": ctx["pattern"]})["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        found = cf(emulator, "GET", f"/zones/{ctx['zone_id']}/workers/routes")
        return [r for r in found if r["pattern"] == ctx["pattern"]]

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("script") == ctx["worker"])


SAMPLES: dict[str, Sample] = {
    sample.kind: sample
    for sample in (
        ZoneSample(),
        DNSRecordSample(),
        KVNamespaceSample(),
        R2BucketSample(),
        D1DatabaseSample(),
        WorkerScriptSample(),
        WorkerRouteSample(),
    )
}


class TunnelSample(Sample):
    kind = "Tunnel"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        await kflare.token_secret()
        await kflare.make_account()
        await kflare.ready("CloudflareAccount", kflare.account)
        return {"name": f"{label}-tunnel", "account": kflare.account, "account_id": kflare.account_id}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"name": ctx["name"], "accountRef": {"name": ctx["account"]}, "credentialsSecretRef": {"name": "tok"}}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        body = {"name": ctx["name"], "config_src": "cloudflare"}
        return str(cf(emulator, "POST", f"/accounts/{ctx['account_id']}/cfd_tunnel", json=body)["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        params = {"name": ctx["name"], "is_deleted": "false"}
        return list(cf(emulator, "GET", f"/accounts/{ctx['account_id']}/cfd_tunnel", params=params))


class TunnelConfigurationSample(Sample):
    kind = "TunnelConfiguration"
    service = "http://web.default.svc:80"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        # The zone covers the rule's host name (else Ready says HostnameNotCovered).
        await kflare.ready_zone(f"{label}.example")
        ctx = {"name": f"{label}-tunnel", "account": kflare.account, "account_id": kflare.account_id}
        await kflare.apply({"kind": "Tunnel", "metadata": {"name": "tunnel"}, "spec": TunnelSample().spec(ctx)})
        tunnel = await kflare.ready("Tunnel", "tunnel")
        return {**ctx, "tunnel_id": tunnel["status"]["cloudflareMetadata"]["tunnelID"], "host": f"app.{label}.example"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"tunnelRef": {"name": "tunnel"}, "ingress": [{"hostname": ctx["host"], "service": self.service}]}

    def _path(self, ctx: dict[str, Any]) -> str:
        return f"/accounts/{ctx['account_id']}/cfd_tunnel/{ctx['tunnel_id']}/configurations"

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        rules = [{"hostname": ctx["host"], "service": "http://old.default.svc:80"}, {"service": "http_status:404"}]
        cf(emulator, "PUT", self._path(ctx), json={"config": {"ingress": rules}})
        return str(ctx["tunnel_id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        """The tunnel's configuration, unless it is nothing or the single catch-all a reset leaves."""
        held = cf(emulator, "GET", self._path(ctx))
        rules = (held.get("config") or {}).get("ingress") or []
        if rules in ([], [{"service": "http_status:404"}]):
            return []
        return [{"id": held["tunnel_id"], **held}]

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held["config"]["ingress"][0]["service"] == self.service)

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        return {"ingress": [{"hostname": ctx["host"], "service": UPDATED_SERVICE}]}

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held["config"]["ingress"][0]["service"] == UPDATED_SERVICE)


SAMPLES.update({sample.kind: sample for sample in (TunnelSample(), TunnelConfigurationSample())})


class RuleSample(Sample):
    """A rule kind: its rule in the zone's entry point of its phase, beside a rule made outside kflare."""

    adoptable = False

    def __init__(self, kind: str, phase: str, spec: dict[str, Any], action: str, **extras: Any) -> None:
        self.kind, self.phase, self._spec, self.action = kind, phase, spec, action
        self.extras = extras
        """The rest of the rule made outside kflare, in Cloudflare's form."""

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        zone_id = await kflare.ready_zone(f"{label}.example")
        return {"zone_id": zone_id, "ref": ref_for(self.kind, kflare.namespace, self.name)}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"zoneRef": {"name": "zone"}, **self._spec}

    def _entrypoint(self, ctx: dict[str, Any]) -> str:
        return f"/zones/{ctx['zone_id']}/rulesets/phases/{self.phase}/entrypoint"

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        # The resource's own rule, left by an earlier cluster, edited since (its expression differs).
        rule = {"ref": ctx["ref"], "action": self.action, "expression": 'http.host eq "old.example"'}
        reply = cf_raw(emulator, "GET", self._entrypoint(ctx))
        if reply.status_code == 404:
            made = cf(
                emulator,
                "POST",
                f"/zones/{ctx['zone_id']}/rulesets",
                json={"name": "default", "kind": "zone", "phase": self.phase, "rules": []},
            )
            ruleset_id = made["id"]
        else:
            ruleset_id = reply.json()["result"]["id"]
        result = cf(
            emulator, "POST", f"/zones/{ctx['zone_id']}/rulesets/{ruleset_id}/rules", json={**rule, **self.extras}
        )
        return str(next(r["id"] for r in result["rules"] if r["ref"] == ctx["ref"]))

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        reply = cf_raw(emulator, "GET", self._entrypoint(ctx))
        if reply.status_code == 404:
            return []
        return [rule for rule in reply.json()["result"]["rules"] if rule["ref"] == ctx["ref"]]

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("expression") == self._spec["expression"])

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        return {"expression": UPDATED_EXPRESSION}

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("expression") == UPDATED_EXPRESSION)


def cf_raw(emulator: CloudflareEndpoint, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return HTTP.request(
        method, emulator.base_url + path, headers={"Authorization": f"Bearer {emulator.token}"}, **kwargs
    )


FREE_MANAGED = "77454fe2d30c4220b5701f6fdfb893ba"
PATH_IS = 'http.request.uri.path eq "/sample"'
RULE_SAMPLES = (
    RuleSample("WAFCustomRule", "http_request_firewall_custom", {"expression": PATH_IS, "action": "block"}, "block"),
    RuleSample(
        "RateLimitRule",
        "http_ratelimit",
        {
            "expression": PATH_IS,
            "ratelimit": {"characteristics": ["cf.colo.id", "ip.src"], "period": 10, "requestsPerPeriod": 20},
        },
        "block",
        ratelimit={"characteristics": ["cf.colo.id", "ip.src"], "period": 10, "requests_per_period": 5},
    ),
    RuleSample(
        "ManagedRuleset",
        "http_request_firewall_managed",
        {"expression": PATH_IS, "rulesetID": FREE_MANAGED},
        "execute",
        action_parameters={"id": FREE_MANAGED},
    ),
    RuleSample(
        "TransformRule",
        "http_request_transform",
        {"expression": PATH_IS, "type": "urlRewrite", "uri": {"path": {"value": "/new"}}},
        "rewrite",
        action_parameters={"uri": {"path": {"value": "/old"}}},
    ),
    RuleSample(
        "RedirectRule",
        "http_request_dynamic_redirect",
        {"expression": PATH_IS, "fromValue": {"targetURL": {"value": "https://example.com/"}}},
        "redirect",
        action_parameters={"from_value": {"target_url": {"value": "https://old.example/"}, "status_code": 302}},
    ),
    RuleSample(
        "CacheRule",
        "http_request_cache_settings",
        {"expression": PATH_IS, "cache": True},
        "set_cache_settings",
        action_parameters={"cache": False},
    ),
    RuleSample(
        "ConfigurationRule",
        "http_config_settings",
        {"expression": PATH_IS, "rocketLoader": False},
        "set_config",
        action_parameters={"rocket_loader": True},
    ),
    RuleSample(
        "OriginRule",
        "http_request_origin",
        {"expression": PATH_IS, "origin": {"port": 8443}},
        "route",
        action_parameters={"origin": {"port": 8080}},
    ),
)


class ManagedTransformSample(Sample):
    """The zone's managed-headers document: "exists" when a transform is on, as kflare counts it."""

    kind = "ManagedTransform"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        return {"zone_id": await kflare.ready_zone(f"{label}.example")}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"zoneRef": {"name": "zone"}, "managedResponseHeaders": [{"id": "add_security_headers"}]}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        switch = {"id": "add_visitor_location_headers", "enabled": True}
        cf(emulator, "PATCH", f"/zones/{ctx['zone_id']}/managed_headers", json={"managed_request_headers": [switch]})
        return str(ctx["zone_id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        document = cf(emulator, "GET", f"/zones/{ctx['zone_id']}/managed_headers")
        switches = [*document["managed_request_headers"], *document["managed_response_headers"]]
        on = sorted(t["id"] for t in switches if t["enabled"])
        return [{"id": ctx["zone_id"], "enabled": on}] if on else []

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return "add_security_headers" in held["enabled"]


class IPListSample(Sample):
    """A custom list, found by its name in the account."""

    kind = "IPList"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        await kflare.token_secret()
        await kflare.make_account()
        await kflare.ready("CloudflareAccount", kflare.account)
        return {"account": kflare.account, "account_id": kflare.account_id, "name": f"{label}_list"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        items = [{"ip": "192.0.2.0/24", "comment": "office"}, {"ip": "198.51.100.7"}]
        return {"accountRef": {"name": ctx["account"]}, "name": ctx["name"], "description": "kflare", "items": items}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        body = {"name": ctx["name"], "kind": "ip", "description": "made by hand"}
        return str(cf(emulator, "POST", f"/accounts/{ctx['account_id']}/rules/lists", json=body)["id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        lists = cf(emulator, "GET", f"/accounts/{ctx['account_id']}/rules/lists")
        return [found for found in lists if found["name"] == ctx["name"]]

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("description") == "kflare" and held.get("num_items") == 2)

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        return {"description": "updated"}

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held.get("description") == "updated")


SAMPLES.update({sample.kind: sample for sample in (IPListSample(), *RULE_SAMPLES, ManagedTransformSample())})


def _samples_of_their_own() -> None:
    """A kind's Sample may be a module of this package of its own (`tests/kinds/<kind>.py`): every `Sample` with a
    `kind` such a module defines joins `SAMPLES`."""
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        for value in vars(loaded).values():
            own = isinstance(value, type) and value.__module__ == loaded.__name__ and "kind" in value.__dict__
            if own and issubclass(value, Sample) and not inspect.isabstract(value):
                SAMPLES[value.kind] = value()


_samples_of_their_own()
