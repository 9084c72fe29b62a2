"""Grant: lets resources of other namespaces reference objects of this one (Gateway API's ReferenceGrant shape).

A WorkerScript binding a KVNamespace, R2Bucket or D1Database of another namespace (`kvNamespaceRef: {name,
namespace}`) needs a Grant in that namespace whose `from` names the WorkerScript's namespace and whose `to` names
the object (or its whole kind). The grant is read on every reconcile of the referring resource, and its change or
deletion reconciles them again: deleting it revokes the reference (the Worker waits, and is uploaded without the
binding no more).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.api.base import KflareModel, KindInfo
from app.api.meta import Status
from app.api.refs import NamespaceName, ObjectName
from app.api.resource import Resource

GrantedFrom = Literal["WorkerScript"]
GrantedTo = Literal["KVNamespace", "R2Bucket", "D1Database"]


class GrantFrom(KflareModel):
    """Resources that may reference: a kind, in a namespace."""

    kind: GrantedFrom
    """The referring kind."""
    namespace: NamespaceName
    """The namespace the referring resources are in."""


class GrantTo(KflareModel):
    """Objects of this namespace that may be referenced."""

    kind: GrantedTo
    """The referenced kind."""
    name: ObjectName | None = None
    """One object of the kind; unset: every object of the kind in this namespace."""


class GrantSpec(KflareModel):
    """Who may reference what: every `from` may reference every `to`."""

    from_: Annotated[list[GrantFrom], Field(min_length=1, max_length=16)]
    """The referring resources."""
    to: Annotated[list[GrantTo], Field(min_length=1, max_length=16)]
    """The objects of this namespace they may reference."""


class GrantStatus(Status):
    """Nothing is written here: each referring resource says in its own conditions whether its reference holds."""


class Grant(Resource[GrantSpec, GrantStatus]):
    """Grant lets resources of other namespaces reference kflare objects of its namespace (a Worker binding another
    team's KV namespace, bucket or database). Without one, a reference across namespaces is refused."""

    info = KindInfo(
        kind="Grant",
        rank=20,
        plural="grants",
        short_names=("cfgrant",),
        categories=(),
        reconciled=False,
    )


def grants(grant: Grant, from_kind: str, from_namespace: str, to_kind: str, to_name: str) -> bool:
    """Whether `grant` lets a `from_kind` of `from_namespace` reference the `to_kind` named `to_name`."""
    spec = grant.spec
    sources = any(f.kind == from_kind and f.namespace == from_namespace for f in spec.from_)
    return sources and any(t.kind == to_kind and t.name in (None, to_name) for t in spec.to)
