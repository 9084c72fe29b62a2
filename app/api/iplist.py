"""IPList: a custom list of IP addresses in an account, used in rule expressions as `$<name>`."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Final, Self

from pydantic import Field, model_validator

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.meta import Status
from app.api.refs import AccountReference
from app.api.resource import Resource
from app.api.text import PRINTABLE_ASCII, TextCheck

LIST_NAME_PATTERN: Final = r"^[a-z0-9_]{1,50}$"
ITEMS_MAX: Final = 10000


def normal_ip(value: str) -> str:
    """An item's address as Cloudflare writes it (compressed, lower case; a whole-host CIDR as the address), or
    ValueError with the reason Cloudflare would refuse it."""
    network = ipaddress.ip_network(value.strip(), strict=True)
    if network.version == 4:
        if network.prefixlen < 8:
            raise ValueError("an IPv4 CIDR is /8 to /32")
        return str(network.network_address) if network.prefixlen == 32 else str(network)
    if not 12 <= network.prefixlen <= 64:
        raise ValueError("an IPv6 item is a CIDR from /12 to /64")
    return str(network)


class IPListItem(KflareModel):
    """One entry of the list."""

    ip: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=64), TextCheck]
    """An IPv4 address, an IPv4 CIDR (/8 to /32) or an IPv6 CIDR (/12 to /64)."""
    comment: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=500), TextCheck] | None = None
    """A note about the entry."""


class IPListSpec(KflareModel):
    """The list: its account, name, description and items."""

    account_ref: AccountReference
    """The CloudflareAccount whose list this is."""
    name: Annotated[str, Field(min_length=1, max_length=50, pattern=LIST_NAME_PATTERN)]
    """The list's name (lower case letters, digits and `_`, up to 50), unique in the account; expressions use it
    as `$<name>`."""
    description: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=500), TextCheck] | None = None
    """A note about the list."""
    items: Annotated[list[IPListItem], Field(max_length=ITEMS_MAX)] = Field(default_factory=list)
    """The list's entries; kflare replaces Cloudflare's whenever they differ (Free accounts: 10,000 in all)."""

    @model_validator(mode="after")
    def _check_items(self) -> Self:
        problems = Problems()
        seen: dict[str, int] = {}
        for index, item in enumerate(self.items):
            try:
                ip = normal_ip(item.ip)
            except ValueError as exc:
                problems.add(("items", index, "ip"), f"{item.ip!r} is not a list entry: {exc}", item.ip)
                continue
            if ip in seen:
                problems.add(("items", index, "ip"), f"{item.ip} is listed twice (items[{seen[ip]}])", item.ip)
            seen.setdefault(ip, index)
        problems.raise_if_any(type(self).__name__)
        return self


class IPListMetadata(KflareModel):
    """What Cloudflare reported of the list."""

    list_id: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=256), TextCheck] | None = None
    """Cloudflare list ID."""
    num_items: int | None = None
    """Entries in the list."""
    num_referencing_filters: int | None = None
    """Rules using the list."""


class IPListStatus(Status):
    """What kflare last observed of the list."""

    cloudflare_metadata: IPListMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class IPList(Resource[IPListSpec, IPListStatus]):
    """IPList manages a custom IP list of an account."""

    info = KindInfo(
        kind="IPList",
        rank=120,
        permissions=(Permission("Account · Account Filter Lists · Edit", "to create lists and replace their items"),),
        claim_label="kflare.dev/ip-list-id",
        plural="iplists",
        short_names=("cfiplist",),
        columns=(
            PrinterColumn("List Name", ".spec.name"),
            PrinterColumn("Items", ".status.cloudflareMetadata.numItems", type="integer"),
            PrinterColumn("List ID", ".status.cloudflareMetadata.listID", priority=1),
        ),
        immutable=("accountRef", "name"),
    )
