"""References from one object to another, and the name formats Kubernetes gives them."""

from __future__ import annotations

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


class LocalObjectReference(KflareModel):
    """A reference to an object by name: in the same namespace, or the cluster-scoped object of that name."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the referenced object."""


class SecretReference(KflareModel):
    """A Secret in any namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the Secret."""
    namespace: NamespaceName
    """Namespace of the Secret."""


class TokenSecretReference(KflareModel):
    """The key of a Secret, in any namespace, that holds a Cloudflare API token."""

    name: ObjectName
    """Name of the Secret."""
    namespace: NamespaceName
    """Namespace of the Secret; it may be any namespace."""
    key: DataKey = "CF_API_TOKEN"
    """Key in the Secret's data that holds the token."""


class KeyReference(KflareModel):
    """A key of a Secret or ConfigMap in the same namespace."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the Secret or ConfigMap."""
    key: DataKey
    """Key in its data."""


class ZoneReference(KflareModel):
    """A Zone, in the same namespace unless `namespace` names another (whose Zone must grant this namespace the
    names it publishes: the Zone's `hostnameGrants`)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})
    refers_to: ClassVar[tuple[str, ...]] = ("Zone",)

    name: ObjectName
    """Name of the Zone."""
    namespace: NamespaceName | None = None
    """Namespace of the Zone; unset is the referring resource's own."""


class AccountReference(KflareModel):
    """The account a resource's Cloudflare objects are in: a cluster-scoped CloudflareAccount by name, or with `kind:
    Account` a namespaced Account of the resource's own namespace (a team's own token)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})
    refers_to: ClassVar[tuple[str, ...]] = ("CloudflareAccount", "Account")

    name: ObjectName
    """Name of the account."""
    kind: Literal["CloudflareAccount", "Account"] | None = None
    """`CloudflareAccount` (unset: the same) or `Account`, in the resource's namespace."""


class LocalTokenSecretReference(KflareModel):
    """The key of a Secret in the same namespace that holds a Cloudflare API token."""

    name: ObjectName
    """Name of the Secret."""
    key: DataKey = "CF_API_TOKEN"
    """Key in the Secret's data that holds the token."""


class BoundObjectReference(KflareModel):
    """A kflare object a Worker binds: in the same namespace, or in `namespace` if a Grant there lets the Worker's
    namespace reference it."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    name: ObjectName
    """Name of the object."""
    namespace: NamespaceName | None = None
    """Namespace of the object; unset is the Worker's own."""
