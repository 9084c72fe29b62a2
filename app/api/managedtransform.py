"""ManagedTransform: a zone's managed transforms (managed request and response headers), turned on and off by ID."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, model_validator

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.meta import Status
from app.api.refs import LocalObjectReference, Refers
from app.api.resource import Resource
from app.api.text import PRINTABLE_ASCII, TextCheck

TransformID = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")]


class TransformSwitch(KflareModel):
    """One managed transform and whether it is on."""

    id: TransformID
    """The transform's ID, such as `add_security_headers` (GET /zones/{zone_id}/managed_headers lists a zone's)."""
    enabled: bool = True
    """Whether it is on."""


Switches = Annotated[list[TransformSwitch], Field(max_length=32)]


class ManagedTransformSpec(KflareModel):
    """The transforms to turn on or off; those not listed keep their state."""

    zone_ref: Annotated[LocalObjectReference, Refers("Zone")]
    """The Zone, in the same namespace, whose transforms these are."""
    managed_request_headers: Switches | None = None
    """Transforms that add or remove headers of requests to the origin."""
    managed_response_headers: Switches | None = None
    """Transforms that add or remove headers of responses to visitors."""

    @model_validator(mode="after")
    def _unique(self) -> Self:
        problems = Problems()
        for field, switches in (
            ("managedRequestHeaders", self.managed_request_headers),
            ("managedResponseHeaders", self.managed_response_headers),
        ):
            seen: set[str] = set()
            for index, switch in enumerate(switches or []):
                if switch.id in seen:
                    problems.add((field, index, "id"), f"{switch.id} is listed twice", switch.id)
                seen.add(switch.id)
        problems.raise_if_any(type(self).__name__)
        return self


class ManagedTransformMetadata(KflareModel):
    """What Cloudflare reported of the zone's transforms."""

    zone_id: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=256), TextCheck] | None = None
    """Cloudflare zone ID: one ManagedTransform configures a zone."""
    enabled: Annotated[list[TransformID], Field(max_length=64)] | None = None
    """The zone's transforms that are on."""


class ManagedTransformStatus(Status):
    """What kflare last observed of the zone's transforms."""

    cloudflare_metadata: ManagedTransformMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class ManagedTransform(Resource[ManagedTransformSpec, ManagedTransformStatus]):
    """ManagedTransform turns a Zone's managed transforms on and off."""

    info = KindInfo(
        kind="ManagedTransform",
        rank=210,
        permissions=(Permission("Zone · Managed Headers · Edit", "to turn the zone's managed transforms on and off"),),
        claim_label="kflare.dev/managed-transform-zone",
        plural="managedtransforms",
        short_names=("cfmanagedtransform",),
        columns=(PrinterColumn("Zone ID", ".status.cloudflareMetadata.zoneID"),),
        immutable=("zoneRef",),
    )
