"""CloudflareClaim: the record that one resource owns one Cloudflare object (cluster-scoped, written by kflare only).

Its name is derived from the object's kind, account and ID (`claim_name`), so the API server's name uniqueness
decides between two resources that reach for the same object at once: the first create wins, the second gets
`409 AlreadyExists` and reads who holds it. kflare takes one when a resource adopts an object or recovers one it
created before a crash; an object a resource created is claimed by its ID in that resource's status (nobody could
hold an object that did not exist). It goes when its owner lets go: the owner's deletion, or the owner gone.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import Field

from app.api.base import KflareModel, KindInfo, PrinterColumn
from app.api.meta import Status
from app.api.refs import NamespaceName, ObjectName
from app.api.resource import Resource

ClaimedID = Annotated[str, Field(min_length=1, max_length=1024)]


def claim_name(kind: str, account_id: str, object_id: str) -> str:
    """The one name a claim on this object can have: the kind, then a digest of the account and the ID (a name
    must be a DNS subdomain, and an ID may be a bucket name, a route pattern or longer than a name may be)."""
    digest = hashlib.sha256(f"{kind}\x00{account_id}\x00{object_id}".encode()).hexdigest()[:40]
    return f"{kind.lower()}-{digest}"


class ClaimOwner(KflareModel):
    """The resource that owns the object."""

    kind: Annotated[str, Field(min_length=1, max_length=63)]
    """Its kind."""
    namespace: NamespaceName | None = None
    """Its namespace."""
    name: ObjectName
    """Its name."""
    uid: Annotated[str, Field(min_length=1, max_length=64)]
    """Its UID: a resource deleted and made again under the same name is another owner."""


class CloudflareClaimSpec(KflareModel):
    """The Cloudflare object and its owner."""

    kind: Annotated[str, Field(min_length=1, max_length=63)]
    """The kflare kind of the object (`Zone`, `Tunnel`, ...)."""
    account_id: Annotated[str, Field(max_length=64)]
    """The Cloudflare account the object is in."""
    object_id: ClaimedID
    """The object's Cloudflare ID (a Worker's or bucket's name)."""
    owner: ClaimOwner
    """The resource that owns it."""


class CloudflareClaimStatus(Status):
    """Nothing is written here."""


class CloudflareClaim(Resource[CloudflareClaimSpec, CloudflareClaimStatus]):
    """CloudflareClaim records which resource owns an existing Cloudflare object it adopted (or recovered after a
    crash). kflare writes and deletes them; nobody else should (RBAC gives tenants no access: they are
    cluster-scoped)."""

    info = KindInfo(
        kind="CloudflareClaim",
        plural="cloudflareclaims",
        short_names=("cfclaim",),
        scope="Cluster",
        categories=(),
        reconciled=False,
        internal=True,
        columns=(
            PrinterColumn("Kind", ".spec.kind"),
            PrinterColumn("Object", ".spec.objectID"),
            PrinterColumn("Owner Namespace", ".spec.owner.namespace"),
            PrinterColumn("Owner", ".spec.owner.name"),
        ),
    )
