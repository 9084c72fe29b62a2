"""GatewayParameters: what a Gateway of the `cloudflare-tunnel` class gets when it asks for a data plane of its own.

A Gateway names one in `spec.infrastructure.parametersRef` (group `kflare.dev`, kind `GatewayParameters`, same
namespace). kflare then gives that Gateway its own Tunnel (a kflare Tunnel in the Gateway's namespace, made in the
account named here) and its own Envoy + cloudflared Deployment, PodDisruptionBudget and ServiceAccount, instead of
the class's shared data plane. It is configuration, not a Cloudflare object: kflare reconciles the Gateways that
name it, not the GatewayParameters itself.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import Field

from app.api.base import KflareModel, KindInfo, PrinterColumn
from app.api.constants import DeletionPolicy
from app.api.meta import Status
from app.api.refs import AccountReference
from app.api.resource import Resource
from app.api.text import NAME_SCHEMA, NameCheck

MAX_REPLICAS: Final = 100
QUANTITY_PATTERN: Final = r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]i?|Ki)?$"
"""Kubernetes' quantity syntax (`100m`, `0.5`, `128Mi`, `1e3`), so a bad one is refused when applied, not when the
Deployment is made from it."""

Quantity = Annotated[str, Field(min_length=1, max_length=32, pattern=QUANTITY_PATTERN)]


class ResourceAmounts(KflareModel):
    """Amounts of CPU and memory."""

    cpu: Quantity | None = None
    """CPU, in cores (`0.5`) or millicores (`500m`)."""
    memory: Quantity | None = None
    """Memory, in bytes with a suffix (`128Mi`)."""


class ResourceRequirements(KflareModel):
    """Compute resources of the data plane's Envoy container (as Kubernetes' `ResourceRequirements`)."""

    requests: ResourceAmounts | None = None
    """Minimum resources, such as `cpu: 100m` and `memory: 128Mi`."""
    limits: ResourceAmounts | None = None
    """Maximum resources."""


class GatewayParametersSpec(KflareModel):
    """The Tunnel and data plane of each Gateway that names these parameters."""

    account_ref: AccountReference
    """The CloudflareAccount each Gateway's own tunnel is made in."""
    tunnel_name: (
        Annotated[str, Field(min_length=1, max_length=200, json_schema_extra=NAME_SCHEMA), NameCheck] | None
    ) = None
    """Name of the tunnel in Cloudflare, as a prefix: a Gateway's tunnel is `<tunnelName>-<namespace>-<gateway>`.
    Unset: `kflare`."""
    tunnel_deletion_policy: DeletionPolicy | None = None
    """What deleting the Gateway does to its tunnel in Cloudflare (`delete` or `retain`); unset is the
    controller's `--default-deletion-policy`. The tunnel's DNS records and ingress rules go either way."""
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 2
    """Replicas of the Gateway's data plane (each runs Envoy and cloudflared, and gets the same configuration)."""
    resources: ResourceRequirements | None = None
    """Compute resources of each replica's Envoy container; unset is the chart's default."""
    allow_external_name_services: bool = False
    """Let the routes of each Gateway send to ExternalName Services. Off by default, and then such a backend is
    refused (`ResolvedRefs=False, InvalidKind`; its traffic gets a 5xx): the name is the Service owner's to choose,
    and could lead past ReferenceGrants or to the data plane's own loopback (CVE-2021-25740). Even on, a name inside
    the cluster must be of the route's namespace or granted by a ReferenceGrant, and loopback, link-local and
    unspecified addresses are refused; a name is not checked for what it resolves to."""


class GatewayParametersStatus(Status):
    """Nothing is written here: each Gateway that names these parameters says in its own conditions whether it has
    its data plane (`Accepted`, and `Programmed` once its tunnel is up), and `kubectl get deployments -l
    kflare.dev/gateway=<name>` shows the plane."""


class GatewayParameters(Resource[GatewayParametersSpec, GatewayParametersStatus]):
    """GatewayParameters gives each Gateway that names it (`spec.infrastructure.parametersRef`) a Cloudflare Tunnel
    and an Envoy + cloudflared data plane of its own."""

    info = KindInfo(
        kind="GatewayParameters",
        rank=10,
        plural="gatewayparameters",
        singular="gatewayparameters",
        categories=(),
        reconciled=False,
        columns=(
            PrinterColumn("Account", ".spec.accountRef.name"),
            PrinterColumn("Replicas", ".spec.replicas", type="integer"),
        ),
    )
