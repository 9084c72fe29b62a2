"""`CloudflareClient`: Cloudflare's v4 API for one token, as typed calls.

The generic layer (`app.cloudflare.calls`: `request()`, `fetch()`, `iterate()`, each call budgeted, bounded and
unwrapped) is inherited; the typed helpers here are a line or two each, which is all a new object type needs.
"""

from __future__ import annotations

import json as _json
from collections.abc import AsyncIterator, Mapping, Sequence

from app.cloudflare.calls import CloudflareCalls, JsonBody, segment
from app.cloudflare.errors import BadResponse, InvalidToken
from app.cloudflare.models import (
    Account,
    CustomList,
    D1Database,
    Deleted,
    DNSBatchResult,
    DNSRecord,
    KVNamespace,
    ListItem,
    ListOperation,
    ManagedHeaders,
    OperationID,
    R2Bucket,
    Ruleset,
    TokenStatus,
    Tunnel,
    TunnelConfiguration,
    WorkerRoute,
    WorkerScript,
    Zone,
)
from app.cloudflare.pagination import PageStyle
from app.cloudflare.secret import Secret

DNS_PER_PAGE = 1000
ZONES_PER_PAGE = 50
ACCOUNTS_PER_PAGE = 50
KV_PER_PAGE = 1000
R2_PER_PAGE = 1000
D1_PER_PAGE = 10000
TUNNELS_PER_PAGE = 1000

LIST_ITEMS_PER_PAGE = 500


class CloudflareClient(CloudflareCalls):
    """The Cloudflare API as seen by one token. Cheap to create; get one from `CloudflareSession.client()` so that
    it shares the process's HTTP client and the token's budget."""

    # -- token ------------------------------------------------------------------------------------------------

    async def verify_token(self, account_id: str | None = None) -> TokenStatus:
        """Verify the token: `/user/tokens/verify`, and when that says the token is unknown (as it does for an
        account-owned token) and `account_id` is known, `/accounts/{account_id}/tokens/verify`."""
        try:
            return await self.fetch("GET", "/user/tokens/verify", TokenStatus)
        except InvalidToken:
            if not account_id:
                raise
        return await self.fetch("GET", f"/accounts/{segment(account_id)}/tokens/verify", TokenStatus)

    # -- accounts ---------------------------------------------------------------------------------------------

    async def get_account(self, account_id: str) -> Account:
        return await self.fetch("GET", f"/accounts/{segment(account_id)}", Account)

    async def list_accounts(self, *, per_page: int = ACCOUNTS_PER_PAGE) -> tuple[list[Account], int]:
        """The first page of the accounts the token reaches, and how many it reaches in all (`result_info`'s
        `total_count`, else the page's length). One call: who asks wants to know whether there is exactly one."""
        response = await self.request("GET", "/accounts", params={"page": 1, "per_page": per_page})
        if not isinstance(response.result, list):
            raise BadResponse("the result is not a list of accounts", method="GET", path="/accounts")
        accounts = [self._parse(Account, item, "GET", "/accounts") for item in response.result]
        total = (response.result_info or {}).get("total_count")
        return accounts, total if isinstance(total, int) and total >= len(accounts) else len(accounts)

    # -- zones ------------------------------------------------------------------------------------------------

    async def get_zone(self, zone_id: str) -> Zone:
        return await self.fetch("GET", f"/zones/{segment(zone_id)}", Zone)

    def list_zones(
        self,
        *,
        name: str | None = None,
        account_id: str | None = None,
        status: str | None = None,
        per_page: int = ZONES_PER_PAGE,
    ) -> AsyncIterator[Zone]:
        params = {
            key: value
            for key, value in (("name", name), ("account.id", account_id), ("status", status))
            if value is not None
        }
        return self.iterate("/zones", Zone, params=params, per_page=per_page)

    async def create_zone(self, name: str, account_id: str, *, type: str = "full") -> Zone:
        body: dict[str, JsonBody] = {"name": name, "account": {"id": account_id}, "type": type}
        return await self.fetch("POST", "/zones", Zone, json=body)

    async def edit_zone(self, zone_id: str, changes: Mapping[str, JsonBody]) -> Zone:
        """PATCH a zone. Cloudflare takes one of `paused`, `type`, `vanity_name_servers` per call."""
        return await self.fetch("PATCH", f"/zones/{segment(zone_id)}", Zone, json=dict(changes))

    async def subscribe_zone(self, zone_id: str, rate_plan: str, *, first: bool) -> None:
        """Put a zone on a rate plan: the first subscription (a zone on the free plan has none) is created with
        POST, a change of plan is a PUT."""
        body: dict[str, JsonBody] = {"rate_plan": {"id": rate_plan}, "frequency": "monthly"}
        await self.request("POST" if first else "PUT", f"/zones/{segment(zone_id)}/subscription", json=body)

    async def delete_zone(self, zone_id: str) -> str | None:
        return (await self.fetch("DELETE", f"/zones/{segment(zone_id)}", Deleted)).id

    # -- DNS records ------------------------------------------------------------------------------------------

    def _dns(self, zone_id: str, record_id: str | None = None) -> str:
        base = f"/zones/{segment(zone_id)}/dns_records"
        return base if record_id is None else f"{base}/{segment(record_id)}"

    async def get_dns_record(self, zone_id: str, record_id: str) -> DNSRecord:
        return await self.fetch("GET", self._dns(zone_id, record_id), DNSRecord)

    def list_dns_records(
        self,
        zone_id: str,
        *,
        filters: Mapping[str, object] | None = None,
        per_page: int = DNS_PER_PAGE,
    ) -> AsyncIterator[DNSRecord]:
        """Every record of the zone (matching `filters`, e.g. `{"type": "A", "name.exact": "www.example.com"}`)."""
        return self.iterate(self._dns(zone_id), DNSRecord, params=filters, per_page=per_page)

    async def create_dns_record(self, zone_id: str, record: Mapping[str, JsonBody]) -> DNSRecord:
        return await self.fetch("POST", self._dns(zone_id), DNSRecord, json=dict(record))

    async def patch_dns_record(self, zone_id: str, record_id: str, changes: Mapping[str, JsonBody]) -> DNSRecord:
        """PATCH: only the fields sent change."""
        return await self.fetch("PATCH", self._dns(zone_id, record_id), DNSRecord, json=dict(changes))

    async def delete_dns_record(self, zone_id: str, record_id: str) -> str | None:
        return (await self.fetch("DELETE", self._dns(zone_id, record_id), Deleted)).id

    async def batch_dns_records(
        self,
        zone_id: str,
        *,
        deletes: Sequence[str] = (),
        patches: Sequence[Mapping[str, JsonBody]] = (),
        puts: Sequence[Mapping[str, JsonBody]] = (),
        posts: Sequence[Mapping[str, JsonBody]] = (),
    ) -> DNSBatchResult:
        """Apply deletes (by ID), patches and puts (each with its `id`), then posts, all or nothing, in one call.
        Cloudflare caps the operations per call (200 on Free)."""
        body: dict[str, JsonBody] = {}
        if deletes:
            body["deletes"] = [{"id": record_id} for record_id in deletes]
        for key, items in (("patches", patches), ("puts", puts), ("posts", posts)):
            if items:
                body[key] = [dict(item) for item in items]
        return await self.fetch("POST", f"{self._dns(zone_id)}/batch", DNSBatchResult, json=body)

    # -- Workers ----------------------------------------------------------------------------------------------

    def _scripts(self, account_id: str, name: str | None = None) -> str:
        base = f"/accounts/{segment(account_id)}/workers/scripts"
        return base if name is None else f"{base}/{segment(name)}"

    def list_worker_scripts(self, account_id: str) -> AsyncIterator[WorkerScript]:
        """Every Worker of the account, with its `modified_on` (one call: the listing is a single page)."""
        return self.iterate(self._scripts(account_id), WorkerScript, style=PageStyle.SINGLE)

    async def upload_worker_script(
        self, account_id: str, name: str, metadata: Mapping[str, JsonBody], modules: Sequence[tuple[str, bytes, str]]
    ) -> WorkerScript:
        """Upload a Worker whole, as Cloudflare's multipart form: a `metadata` JSON part and one part per module
        (`(file name, content, content type)`). The whole-request bound covers the upload."""
        files: list[tuple[str, tuple[str | None, bytes, str]]] = [
            ("metadata", (None, _json.dumps(dict(metadata)).encode(), "application/json"))
        ]
        files += [(filename, (filename, content, content_type)) for filename, content, content_type in modules]
        return await self.fetch("PUT", self._scripts(account_id, name), WorkerScript, files=files)

    async def delete_worker_script(self, account_id: str, name: str) -> None:
        await self.request("DELETE", self._scripts(account_id, name), params={"force": "true"})

    def _routes(self, zone_id: str, route_id: str | None = None) -> str:
        base = f"/zones/{segment(zone_id)}/workers/routes"
        return base if route_id is None else f"{base}/{segment(route_id)}"

    def list_worker_routes(self, zone_id: str) -> AsyncIterator[WorkerRoute]:
        return self.iterate(self._routes(zone_id), WorkerRoute, style=PageStyle.SINGLE)

    async def get_worker_route(self, zone_id: str, route_id: str) -> WorkerRoute:
        return await self.fetch("GET", self._routes(zone_id, route_id), WorkerRoute)

    async def create_worker_route(self, zone_id: str, pattern: str, script: str | None) -> WorkerRoute:
        body: dict[str, JsonBody] = {"pattern": pattern}
        if script:
            body["script"] = script
        return await self.fetch("POST", self._routes(zone_id), WorkerRoute, json=body)

    async def update_worker_route(self, zone_id: str, route_id: str, pattern: str, script: str | None) -> WorkerRoute:
        """PUT: a route sent without `script` becomes an exclusion route."""
        body: dict[str, JsonBody] = {"pattern": pattern}
        if script:
            body["script"] = script
        return await self.fetch("PUT", self._routes(zone_id, route_id), WorkerRoute, json=body)

    async def delete_worker_route(self, zone_id: str, route_id: str) -> None:
        await self.request("DELETE", self._routes(zone_id, route_id))

    # -- Workers KV -------------------------------------------------------------------------------------------

    def _kv(self, account_id: str, namespace_id: str | None = None) -> str:
        base = f"/accounts/{segment(account_id)}/storage/kv/namespaces"
        return base if namespace_id is None else f"{base}/{segment(namespace_id)}"

    def list_kv_namespaces(self, account_id: str) -> AsyncIterator[KVNamespace]:
        return self.iterate(self._kv(account_id), KVNamespace, per_page=KV_PER_PAGE)

    async def get_kv_namespace(self, account_id: str, namespace_id: str) -> KVNamespace:
        return await self.fetch("GET", self._kv(account_id, namespace_id), KVNamespace)

    async def create_kv_namespace(self, account_id: str, title: str) -> KVNamespace:
        return await self.fetch("POST", self._kv(account_id), KVNamespace, json={"title": title})

    async def rename_kv_namespace(self, account_id: str, namespace_id: str, title: str) -> None:
        await self.request("PUT", self._kv(account_id, namespace_id), json={"title": title})

    async def delete_kv_namespace(self, account_id: str, namespace_id: str) -> None:
        await self.request("DELETE", self._kv(account_id, namespace_id))

    # -- R2 ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _jurisdiction(jurisdiction: str) -> dict[str, str] | None:
        return None if jurisdiction in ("", "default") else {"cf-r2-jurisdiction": jurisdiction}

    def list_r2_buckets(self, account_id: str, jurisdiction: str = "default") -> AsyncIterator[R2Bucket]:
        """The account's buckets of one jurisdiction (each jurisdiction is its own namespace of names)."""
        return self.iterate(
            f"/accounts/{segment(account_id)}/r2/buckets",
            R2Bucket,
            style=PageStyle.CURSOR,
            per_page=R2_PER_PAGE,
            items_key="buckets",
            headers=self._jurisdiction(jurisdiction),
        )

    async def create_r2_bucket(
        self, account_id: str, name: str, *, location_hint: str | None = None, jurisdiction: str = "default"
    ) -> R2Bucket:
        body: dict[str, JsonBody] = {"name": name}
        if location_hint:
            body["locationHint"] = location_hint
        return await self.fetch(
            "POST",
            f"/accounts/{segment(account_id)}/r2/buckets",
            R2Bucket,
            json=body,
            headers=self._jurisdiction(jurisdiction),
        )

    async def get_r2_bucket(self, account_id: str, name: str, jurisdiction: str = "default") -> R2Bucket:
        return await self.fetch(
            "GET",
            f"/accounts/{segment(account_id)}/r2/buckets/{segment(name)}",
            R2Bucket,
            headers=self._jurisdiction(jurisdiction),
        )

    async def delete_r2_bucket(self, account_id: str, name: str, jurisdiction: str = "default") -> None:
        await self.request(
            "DELETE",
            f"/accounts/{segment(account_id)}/r2/buckets/{segment(name)}",
            headers=self._jurisdiction(jurisdiction),
        )

    # -- D1 ---------------------------------------------------------------------------------------------------

    def _d1(self, account_id: str, database_id: str | None = None) -> str:
        base = f"/accounts/{segment(account_id)}/d1/database"
        return base if database_id is None else f"{base}/{segment(database_id)}"

    def list_d1_databases(self, account_id: str) -> AsyncIterator[D1Database]:
        return self.iterate(self._d1(account_id), D1Database, per_page=D1_PER_PAGE)

    async def get_d1_database(self, account_id: str, database_id: str) -> D1Database:
        return await self.fetch("GET", self._d1(account_id, database_id), D1Database)

    async def create_d1_database(
        self, account_id: str, name: str, *, jurisdiction: str | None = None, location_hint: str | None = None
    ) -> D1Database:
        body: dict[str, JsonBody] = {"name": name}
        if jurisdiction:
            body["jurisdiction"] = jurisdiction
        if location_hint:
            body["primary_location_hint"] = location_hint
        return await self.fetch("POST", self._d1(account_id), D1Database, json=body)

    async def delete_d1_database(self, account_id: str, database_id: str) -> None:
        await self.request("DELETE", self._d1(account_id, database_id))

    # -- tunnels ----------------------------------------------------------------------------------------------

    def _tunnels(self, account_id: str, tunnel_id: str | None = None) -> str:
        base = f"/accounts/{segment(account_id)}/cfd_tunnel"
        return base if tunnel_id is None else f"{base}/{segment(tunnel_id)}"

    def list_tunnels(
        self, account_id: str, *, name: str | None = None, include_deleted: bool = False
    ) -> AsyncIterator[Tunnel]:
        """The account's tunnels (live ones only unless `include_deleted`)."""
        params: dict[str, object] = {} if include_deleted else {"is_deleted": False}
        if name is not None:
            params["name"] = name
        return self.iterate(self._tunnels(account_id), Tunnel, params=params, per_page=TUNNELS_PER_PAGE)

    async def get_tunnel(self, account_id: str, tunnel_id: str) -> Tunnel:
        return await self.fetch("GET", self._tunnels(account_id, tunnel_id), Tunnel)

    async def create_tunnel(self, account_id: str, name: str, *, tunnel_secret: str) -> Tunnel:
        """A remotely managed tunnel (its configuration lives in the API)."""
        body: dict[str, JsonBody] = {"name": name, "config_src": "cloudflare", "tunnel_secret": tunnel_secret}
        return await self.fetch("POST", self._tunnels(account_id), Tunnel, json=body)

    async def edit_tunnel(self, account_id: str, tunnel_id: str, changes: Mapping[str, JsonBody]) -> Tunnel:
        return await self.fetch("PATCH", self._tunnels(account_id, tunnel_id), Tunnel, json=dict(changes))

    async def delete_tunnel(self, account_id: str, tunnel_id: str) -> Tunnel:
        """Soft-delete the tunnel, its connectors with it (`cascade`)."""
        path = self._tunnels(account_id, tunnel_id)
        return await self.fetch("DELETE", path, Tunnel, params={"cascade": True})

    async def get_tunnel_token(self, account_id: str, tunnel_id: str) -> Secret:
        """The token cloudflared runs the tunnel with, wrapped so that it never shows in a log."""
        response = await self.request("GET", f"{self._tunnels(account_id, tunnel_id)}/token")
        if not isinstance(response.result, str) or not response.result:
            raise BadResponse("the tunnel token is not a string", method="GET", path="token")
        return Secret(response.result)

    async def disconnect_tunnel(self, account_id: str, tunnel_id: str) -> None:
        """Disconnect every connector (a running cloudflared drops at once)."""
        await self.request("DELETE", f"{self._tunnels(account_id, tunnel_id)}/connections")

    async def get_tunnel_configuration(self, account_id: str, tunnel_id: str) -> TunnelConfiguration:
        path = f"{self._tunnels(account_id, tunnel_id)}/configurations"
        return await self.fetch("GET", path, TunnelConfiguration)

    async def put_tunnel_configuration(
        self, account_id: str, tunnel_id: str, config: Mapping[str, JsonBody]
    ) -> TunnelConfiguration:
        """Replace the whole configuration (Cloudflare bumps its version)."""
        path = f"{self._tunnels(account_id, tunnel_id)}/configurations"
        return await self.fetch("PUT", path, TunnelConfiguration, json={"config": dict(config)})

    # -- rulesets ---------------------------------------------------------------------------------------------

    async def get_entrypoint(self, zone_id: str, phase: str) -> Ruleset:
        """The zone's entry point ruleset of a phase, with its rules; `NotFound` until the zone has one."""
        return await self.fetch(
            "GET", f"/zones/{segment(zone_id)}/rulesets/phases/{segment(phase)}/entrypoint", Ruleset
        )

    async def create_entrypoint(self, zone_id: str, phase: str, *, name: str = "default") -> Ruleset:
        """A new, empty entry point (POST: unlike a PUT of the entry point, it can never replace anyone's rules)."""
        body: dict[str, JsonBody] = {"name": name, "kind": "zone", "phase": phase, "rules": []}
        return await self.fetch("POST", f"/zones/{segment(zone_id)}/rulesets", Ruleset, json=body)

    async def delete_ruleset(self, zone_id: str, ruleset_id: str) -> None:
        await self.request_raw("DELETE", f"/zones/{segment(zone_id)}/rulesets/{segment(ruleset_id)}")

    def _rules(self, zone_id: str, ruleset_id: str, rule_id: str | None = None) -> str:
        base = f"/zones/{segment(zone_id)}/rulesets/{segment(ruleset_id)}/rules"
        return base if rule_id is None else f"{base}/{segment(rule_id)}"

    async def create_rule(self, zone_id: str, ruleset_id: str, rule: Mapping[str, JsonBody]) -> Ruleset:
        """Add one rule (where its `position` says, else last); the whole ruleset comes back."""
        return await self.fetch("POST", self._rules(zone_id, ruleset_id), Ruleset, json=dict(rule))

    async def edit_rule(self, zone_id: str, ruleset_id: str, rule_id: str, rule: Mapping[str, JsonBody]) -> Ruleset:
        """Change a rule (the complete definition) and/or move it (`position` alone); the whole ruleset comes back."""
        return await self.fetch("PATCH", self._rules(zone_id, ruleset_id, rule_id), Ruleset, json=dict(rule))

    async def delete_rule(self, zone_id: str, ruleset_id: str, rule_id: str) -> Ruleset:
        return await self.fetch("DELETE", self._rules(zone_id, ruleset_id, rule_id), Ruleset)

    # -- managed transforms -----------------------------------------------------------------------------------

    async def get_managed_headers(self, zone_id: str) -> ManagedHeaders:
        return await self.fetch("GET", f"/zones/{segment(zone_id)}/managed_headers", ManagedHeaders)

    async def patch_managed_headers(self, zone_id: str, changes: Mapping[str, JsonBody]) -> ManagedHeaders:
        """Turn the transforms sent on or off; the others keep their state."""
        return await self.fetch(
            "PATCH", f"/zones/{segment(zone_id)}/managed_headers", ManagedHeaders, json=dict(changes)
        )

    async def delete_managed_headers(self, zone_id: str) -> None:
        """Turn every managed transform of the zone off."""
        await self.request_raw("DELETE", f"/zones/{segment(zone_id)}/managed_headers")

    # -- custom lists -----------------------------------------------------------------------------------------

    def _lists(self, account_id: str, list_id: str | None = None) -> str:
        base = f"/accounts/{segment(account_id)}/rules/lists"
        return base if list_id is None else f"{base}/{segment(list_id)}"

    def list_lists(self, account_id: str) -> AsyncIterator[CustomList]:
        """The account's custom lists, without their items (one call: Cloudflare answers them in one page)."""
        return self.iterate(self._lists(account_id), CustomList, style=PageStyle.SINGLE)

    async def get_list(self, account_id: str, list_id: str) -> CustomList:
        return await self.fetch("GET", self._lists(account_id, list_id), CustomList)

    async def create_list(self, account_id: str, name: str, *, kind: str = "ip", description: str = "") -> CustomList:
        body: dict[str, JsonBody] = {"name": name, "kind": kind, "description": description}
        return await self.fetch("POST", self._lists(account_id), CustomList, json=body)

    async def update_list(self, account_id: str, list_id: str, description: str) -> CustomList:
        return await self.fetch("PUT", self._lists(account_id, list_id), CustomList, json={"description": description})

    async def delete_list(self, account_id: str, list_id: str) -> None:
        await self.request("DELETE", self._lists(account_id, list_id))

    def list_items(
        self, account_id: str, list_id: str, *, per_page: int = LIST_ITEMS_PER_PAGE
    ) -> AsyncIterator[ListItem]:
        return self.iterate(
            f"{self._lists(account_id, list_id)}/items", ListItem, style=PageStyle.CURSOR_AFTER, per_page=per_page
        )

    async def replace_list_items(self, account_id: str, list_id: str, items: Sequence[Mapping[str, JsonBody]]) -> str:
        """Replace every item of the list (asynchronously): the bulk operation's ID."""
        path = f"{self._lists(account_id, list_id)}/items"
        return (await self.fetch("PUT", path, OperationID, json=[dict(item) for item in items])).operation_id

    async def get_list_operation(self, account_id: str, operation_id: str) -> ListOperation:
        path = f"{self._lists(account_id)}/bulk_operations/{segment(operation_id)}"
        return await self.fetch("GET", path, ListOperation)
