"""Zone: a domain in the account a CloudflareAccount names.

Key for adoption: the domain within that account (a zone of the same name in another account the token reaches is
never taken). Corrected drift: the setup type, and the plan when `spec.plan` is set (a plan already pending for the
end of the billing period counts as applied).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.api import Zone
from app.api.zone import ZoneMetadata
from app.cloudflare.models import Zone as CloudflareZone
from app.kube.informer import Indexer
from reconcilers.account_members import AccountMember, AccountScope
from reconcilers.capabilities import Indexed
from reconcilers.credentials import ZONE_ID_INDEX, zone_ids
from reconcilers.managed_kind import Changes
from reconcilers.tenancy import DOMAIN_INDEX, zone_domains


class ZoneKind(AccountMember[Zone, CloudflareZone], Indexed):
    model = Zone
    status_id = "zone_id"

    def list_members(self, link: AccountScope) -> AsyncIterator[CloudflareZone]:
        return link.account.client.list_zones(account_id=link.account.account_id)

    async def get_member(self, link: AccountScope, object_id: str) -> CloudflareZone:
        return await link.account.client.get_zone(object_id)

    def listed_key(self, observed: CloudflareZone) -> str:
        return observed.name.lower()

    async def find(self, link: AccountScope, obj: Zone) -> CloudflareZone | None:
        account_id = link.account.account_id
        named = await self.named(link, obj, obj.spec.name.lower())
        return next((zone for zone in named if zone.account.id == account_id), None)

    async def create(self, link: AccountScope, obj: Zone) -> CloudflareZone:
        client = link.account.client
        created = await client.create_zone(obj.spec.name.lower(), link.account.account_id, type=obj.spec.type)
        self.listings.put(link.collection, created)
        return created

    def diff(self, link: AccountScope, obj: Zone, observed: CloudflareZone) -> Changes:
        changes: Changes = {}
        if observed.type and observed.type != obj.spec.type:
            changes["type"] = obj.spec.type
        if obj.spec.plan is not None:
            current = observed.plan.legacy_id if observed.plan else None
            pending = _pending_plan(observed)
            if obj.spec.plan not in (current, pending):
                changes["plan"] = obj.spec.plan
        return changes

    async def update(self, link: AccountScope, obj: Zone, observed: CloudflareZone, changes: Changes) -> CloudflareZone:
        client = link.account.client
        zone = observed
        if "type" in changes:
            zone = await client.edit_zone(observed.id, {"type": changes["type"]})
        plan = changes.get("plan")
        if isinstance(plan, str):
            # A zone on the free plan has no subscription yet: it is created with POST, changed with PUT.
            subscribed = bool(observed.plan and observed.plan.legacy_id not in (None, "free"))
            await client.subscribe_zone(observed.id, plan, first=not subscribed)
            zone = await client.get_zone(observed.id)
        self.listings.put(link.collection, zone)
        return zone

    async def delete(self, link: AccountScope, obj: Zone, object_id: str) -> None:
        await link.account.client.delete_zone(object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: Zone, observed: CloudflareZone) -> None:
        obj.status.cloudflare_metadata = ZoneMetadata(
            zone_id=observed.id,
            name_servers=observed.name_servers or None,
            status=observed.status,
            plan=observed.plan.legacy_id if observed.plan else None,
            pending_plan=_pending_plan(observed),
        )

    @classmethod
    def more_indexes(cls) -> dict[str, Indexer]:
        """Beside the claim: the Cloudflare zone, which the rules and ManagedTransforms of one zone are found by, and
        the domain, which a host name's Zone is found by."""
        return {ZONE_ID_INDEX: zone_ids, DOMAIN_INDEX: zone_domains}


def _pending_plan(zone: CloudflareZone) -> str | None:
    extra = zone.model_extra or {}
    pending = extra.get("plan_pending") or {}
    value = pending.get("legacy_id") if isinstance(pending, dict) else None
    return value if isinstance(value, str) else None
