"""References from one object to another, and the name formats Kubernetes gives them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from app.api.base import KflareModel

DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CONFIG_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"

ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)]
"""The name of a Kubernetes object (a DNS subdomain: lower case letters, digits, `-` and `.`)."""
NamespaceName = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)]
"""The name of a namespace (a DNS label)."""
DataKey = Annotated[str, Field(min_length=1, max_length=253, pattern=CONFIG_KEY_PATTERN)]
"""A key of a Secret's or ConfigMap's data."""

Target = tuple[str, str, str]
"""An object a reference names: its kind, namespace ("" for a cluster-scoped one) and name."""


@dataclass(frozen=True)
class Refers:
    """Declares a field a reference to objects of `kind`, where its type does not say which kind (a
    `LocalObjectReference`, or a bare name): `Annotated[LocalObjectReference, Refers("Tunnel")]`. The referenced
    objects are the referrer's parents: the registry orders the kinds by it, and the reconcilers' dependency index
    links the objects by it (`app.api.links`)."""

    kind: str


class Reference(KflareModel):
    """A reference to another object; the kinds it may name are its `refers_to`, or the field's `Refers`."""

    refers_to: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def targets(cls, value: Mapping[str, object], kind: str, namespace: str) -> list[Target]:
        """What `value` (the reference as stored) names for a referrer in `namespace`, `kind` being what the field
        declares: read from the stored object, not a parsed one, as the dependency index reads every watch event.
        By default the object of that name in the reference's `namespace`, if the type has one, else the
        referrer's."""
        name = value.get("name")
        if not name:
            return []
        own = value.get("namespace") if "namespace" in cls.model_fields else None
        return [(kind, str(own or namespace), str(name))]


class LocalObjectReference(Reference):
    """A reference to an object by name: in the same namespace, or the cluster-scoped object of that name."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the referenced object."""


class SecretReference(Reference):
    """A Secret in any namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the Secret."""
    namespace: NamespaceName
    """Namespace of the Secret."""


class TokenSecretReference(Reference):
    """The key of a Secret, in any namespace, that holds a Cloudflare API token."""

    refers_to: ClassVar[tuple[str, ...]] = ("Secret",)

    name: ObjectName
    """Name of the Secret."""
    namespace: NamespaceName
    """Namespace of the Secret; it may be any namespace."""
    key: DataKey = "CF_API_TOKEN"
    """Key in the Secret's data that holds the token."""

    @classmethod
    def targets(cls, value: Mapping[str, object], kind: str, namespace: str) -> list[Target]:
        # a cluster-scoped referrer has no namespace to default to: a Secret nowhere is no edge
        return [target for target in super().targets(value, kind, namespace) if target[1]]


class KeyReference(Reference):
    """A key of a Secret or ConfigMap in the same namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the Secret or ConfigMap."""
    key: DataKey
    """Key in its data."""


class ZoneReference(Reference):
    """A Zone, in the same namespace unless `namespace` names another (whose Zone must grant this namespace the
    names it publishes: the Zone's `hostnameGrants`)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})
    refers_to: ClassVar[tuple[str, ...]] = ("Zone",)

    name: ObjectName
    """Name of the Zone."""
    namespace: NamespaceName | None = None
    """Namespace of the Zone; unset is the referring resource's own."""


class AccountReference(Reference):
    """The account a resource's Cloudflare objects are in: a cluster-scoped CloudflareAccount by name, or with `kind:
    Account` a namespaced Account of the resource's own namespace (a team's own token)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})
    refers_to: ClassVar[tuple[str, ...]] = ("CloudflareAccount", "Account")

    name: ObjectName
    """Name of the account."""
    kind: Literal["CloudflareAccount", "Account"] | None = None
    """`CloudflareAccount` (unset: the same) or `Account`, in the resource's namespace."""

    @classmethod
    def targets(cls, value: Mapping[str, object], kind: str, namespace: str) -> list[Target]:
        name = value.get("name")
        if not name:
            return []
        if value.get("kind") == "Account":
            return [("Account", namespace, str(name))]
        return [("CloudflareAccount", "", str(name))]


class LocalTokenSecretReference(Reference):
    """The key of a Secret in the same namespace that holds a Cloudflare API token."""

    refers_to: ClassVar[tuple[str, ...]] = ("Secret",)

    name: ObjectName
    """Name of the Secret."""
    key: DataKey = "CF_API_TOKEN"
    """Key in the Secret's data that holds the token."""


class BoundObjectReference(Reference):
    """A kflare object a Worker binds: in the same namespace, or in `namespace` if a Grant there lets the Worker's
    namespace reference it."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the object."""
    namespace: NamespaceName | None = None
    """Namespace of the object; unset is the Worker's own."""

    @classmethod
    def targets(cls, value: Mapping[str, object], kind: str, namespace: str) -> list[Target]:
        named = super().targets(value, kind, namespace)
        # a Grant of the other namespace given or taken back decides whether the reference holds: any Grant there
        # (the empty name stands for them all) reconciles the referrer
        return [*named, *(("Grant", where, "") for _, where, _ in named if where != namespace)]
