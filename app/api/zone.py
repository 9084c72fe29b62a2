"""Zone: a domain on Cloudflare, in the account a CloudflareAccount names."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn
from app.api.meta import Status
from app.api.refs import AccountReference
from app.api.resource import Resource
from app.api.tenancy import HostnameGrant

DOMAIN_PATTERN = r"^([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}$"
ZonePlan = Literal["free", "pro", "business", "enterprise"]
ZoneType = Literal["full", "partial"]
CloudflareValue = Annotated[str, Field(max_length=256)]


class ZoneSpec(KflareModel):
    """The domain, the account it belongs to, and optionally its plan and setup type."""

    name: Annotated[str, Field(min_length=1, max_length=253, pattern=DOMAIN_PATTERN)]
    """The domain, such as `example.com`."""
    account_ref: AccountReference
    """The CloudflareAccount the zone belongs to."""
    plan: ZonePlan | None = None
    """The plan to subscribe the zone to (this bills the account). Unset leaves the zone's plan alone."""
    type: ZoneType = "full"
    """Setup type: `full` (Cloudflare is the authoritative DNS) or `partial` (CNAME setup)."""
    hostname_grants: Annotated[list[HostnameGrant], Field(max_length=64)] | None = None
    """Namespaces other than the Zone's own that may publish names in the zone: DNSRecords that name this Zone
    (`zoneRef.namespace`), tunnel ingress rules and Gateway routes. Names in a zone a Zone manages are published only
    for the Zone's namespace and the namespaces granted here."""


class ZoneMetadata(KflareModel):
    """What Cloudflare reported of the zone."""

    zone_id: CloudflareValue | None = None
    """Cloudflare zone ID."""
    name_servers: Annotated[list[CloudflareValue], Field(max_length=16)] | None = None
    """Name servers Cloudflare assigned to the zone; point the registrar at them."""
    status: CloudflareValue | None = None
    """Zone status in Cloudflare: active, pending, initializing, moved or deactivated."""
    plan: CloudflareValue | None = None
    """Current plan (legacy ID such as `free`)."""
    pending_plan: CloudflareValue | None = None
    """Plan change scheduled for the end of the billing period."""


class ZoneStatus(Status):
    """What kflare last observed of the zone."""

    cloudflare_metadata: ZoneMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class Zone(Resource[ZoneSpec, ZoneStatus]):
    """Zone manages a domain (a zone) on Cloudflare."""

    info = KindInfo(
        kind="Zone",
        rank=20,
        permissions=(
            Permission(
                "Zone · Zone · Edit",
                "to create and delete zones; Zone · Zone · Read is enough when every Zone adopts an existing zone",
            ),
            Permission(
                "Account · Billing · Edit",
                "to subscribe the zone to a plan (this bills the account)",
                label="Zone with `spec.plan`",
            ),
        ),
        claim_label="kflare.dev/zone-id",
        plural="zones",
        short_names=("cfzone",),
        columns=(
            PrinterColumn("Domain", ".spec.name"),
            PrinterColumn("Zone ID", ".status.cloudflareMetadata.zoneID"),
            PrinterColumn("Plan", ".status.cloudflareMetadata.plan"),
            PrinterColumn("CF Status", ".status.cloudflareMetadata.status"),
        ),
        immutable=("name", "accountRef"),
    )
