"""The kinds of cloudflare-tunnel-gateway-controller (group `cf.k8s.lex.la`, version `v1alpha1`), which kflare's
Gateway class reads as the equivalents of its own so that a cluster moving from that package keeps its manifests
(docs/migrating-from-tunnel-gateway.md):

- GatewayClassConfig (cluster-scoped), a GatewayClass's `parametersRef`: an existing tunnel (by ID) and the Secret
  of an API token. kflare derives a CloudflareAccount and a Tunnel adopting that tunnel from it
  (`reconcilers.gateway.package`).
- GatewayConfig, a Gateway's `spec.infrastructure.parametersRef`: a data plane of the Gateway's own, running the
  tunnel of a connector token; kflare's equivalent of a GatewayParameters.
- ExternalBackend, a route's backendRef: an origin outside the cluster, with its scheme, host, port and a base
  path prepended to the request's.

The fields are the package's, named as it names them (`accountId`, `tunnelID`); what kflare does not do with one
is said on the field. kflare never writes these objects: their status is the package's, and kflare reports in the
Gateway API objects' statuses instead.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import Field

from app.api.base import KflareModel, KindInfo, PrinterColumn
from app.api.gateway_parameters import MAX_REPLICAS, ResourceRequirements
from app.api.meta import Status
from app.api.resource import Resource, ResourceClass
from app.api.text import NAME_SCHEMA, NameCheck

PACKAGE_GROUP: Final = "cf.k8s.lex.la"
API_TOKEN_KEY: Final = "api-token"
"""The key of the credentials Secret holding the API token, unless the reference names another."""
ACCOUNT_ID_KEY: Final = "account-id"
"""The key of the credentials Secret that may hold the account ID."""
TUNNEL_TOKEN_KEY: Final = "tunnel-token"
"""The key of a GatewayConfig's token Secret holding the connector token, unless the reference names another."""
TUNNEL_ID_PATTERN: Final = r"^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$"
ACCOUNT_ID_PATTERN: Final = r"^([a-f0-9]{32})?$"

ObjectName = Annotated[str, Field(min_length=1, max_length=253, json_schema_extra=NAME_SCHEMA), NameCheck]
DataKey = Annotated[str, Field(max_length=253, pattern=r"^([-._a-zA-Z0-9]+)?$")]


class CredentialsSecretReference(KflareModel):
    """The Secret holding a Cloudflare API token."""

    name: ObjectName
    """Name of the Secret."""
    namespace: Annotated[str, Field(max_length=63, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$")] | None = None
    """Namespace of the Secret; unset is the controller's namespace (install kflare where the package ran, and the
    reference means the same Secret)."""
    key: DataKey | None = None
    """Key of the API token in the Secret; unset is `api-token`."""


class GatewayClassConfigSpec(KflareModel):
    """An existing tunnel and the credentials that configure it."""

    cloudflare_credentials_secret_ref: CredentialsSecretReference
    """The Secret of the API token (Account, Cloudflare Tunnel, Edit). kflare makes a CloudflareAccount of it."""
    account_id: Annotated[str, Field(pattern=ACCOUNT_ID_PATTERN)] | None = Field(default=None, alias="accountId")
    """The Cloudflare account ID; unset: the Secret's `account-id` key, else the one account the token reaches."""
    tunnel_id: Annotated[str, Field(pattern=TUNNEL_ID_PATTERN)]
    """The tunnel's ID. kflare adopts that tunnel (a Tunnel in its own namespace, deletion policy `retain`): it
    writes the tunnel's ingress document and never deletes the tunnel."""


class PackageStatus(Status):
    """The package's; kflare writes nothing here."""


class GatewayClassConfig(Resource[GatewayClassConfigSpec, PackageStatus]):
    """GatewayClassConfig names the tunnel and the credentials of the GatewayClasses whose parametersRef names it."""

    info = KindInfo(
        kind="GatewayClassConfig",
        plural="gatewayclassconfigs",
        short_names=("gcconfig",),
        scope="Cluster",
        categories=(),
        reconciled=False,
        group=PACKAGE_GROUP,
        columns=(PrinterColumn("Tunnel ID", ".spec.tunnelID"),),
    )


class SecretKeyReference(KflareModel):
    """A key of a Secret in the same namespace."""

    name: ObjectName
    """Name of the Secret."""
    key: DataKey | None = None
    """The key; unset is the field's default."""


class ProxyAutoscaling(KflareModel):
    """The package's autoscaling of a Gateway's proxies. kflare does not scale a plane: a GatewayConfig with it is
    refused in the Gateway's status; give `replicas` instead."""

    min_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] | None = None
    max_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    target_inflight_per_pod: Annotated[int, Field(ge=1)]
    metric_name: Annotated[str, Field(max_length=253)] | None = None


class GatewayConfigSpec(KflareModel):
    """The data plane of each Gateway whose `spec.infrastructure.parametersRef` names this GatewayConfig."""

    tunnel_token_secret_ref: SecretKeyReference
    """The Secret (same namespace) of the connector token (key `tunnel-token` unless `key` says otherwise): the
    tunnel the Gateway's own plane runs, which kflare adopts by the ID inside the token."""
    cloudflare_credentials_secret_ref: SecretKeyReference | None = None
    """Other API credentials for this Gateway's tunnel. Not read by kflare, which uses the class's; a GatewayConfig
    with it is refused in the Gateway's status."""
    auth_token_secret_ref: SecretKeyReference | None = None
    """The package's proxy API token. Not needed by kflare (its planes authenticate to the controller's xDS
    listener with a credential of their own) and ignored."""
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] | None = None
    """Replicas of the Gateway's data plane; unset is 2."""
    autoscaling: ProxyAutoscaling | None = None
    """Not done by kflare (see ProxyAutoscaling)."""
    resources: ResourceRequirements | None = None
    """Compute resources of each replica's Envoy."""
    image: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9._/:@-]*$")] | None = (
        None
    )
    """The package's proxy image. kflare's planes run Envoy and cloudflared of the controller's images, so it is
    ignored."""


class GatewayConfig(Resource[GatewayConfigSpec, PackageStatus]):
    """GatewayConfig gives each Gateway that names it a data plane of its own, running the tunnel of its token."""

    info = KindInfo(
        kind="GatewayConfig",
        plural="gatewayconfigs",
        short_names=("gwconfig",),
        categories=(),
        reconciled=False,
        group=PACKAGE_GROUP,
        columns=(PrinterColumn("Tunnel Token Secret", ".spec.tunnelTokenSecretRef.name"),),
    )


class Scheme(StrEnum):
    HTTP = "http"
    HTTPS = "https"


class ExternalBackendSpec(KflareModel):
    """An HTTP or HTTPS origin outside the cluster."""

    scheme: Literal[Scheme.HTTP, Scheme.HTTPS]
    """`https`: Envoy speaks TLS to it, sends the host as SNI and checks the certificate is the host's, against the
    system's CAs."""
    host: Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[a-zA-Z0-9._:\[\]-]+$")]
    """Host name or IP address (an IPv6 one in brackets), without scheme, port or path."""
    port: Annotated[int, Field(ge=1, le=65535)]
    """TCP port; a backendRef's port is not read."""
    path: Annotated[str, Field(max_length=1024, pattern=r"^/.*$")] | None = None
    """A base path prepended to each request's path. A query string in it is not supported (the route is
    refused)."""


class ExternalBackend(Resource[ExternalBackendSpec, PackageStatus]):
    """ExternalBackend is an origin outside the cluster that an HTTPRoute or GRPCRoute names as a backendRef (group
    `cf.k8s.lex.la`, kind `ExternalBackend`; another namespace's needs a ReferenceGrant naming that kind)."""

    info = KindInfo(
        kind="ExternalBackend",
        plural="externalbackends",
        short_names=("extbackend",),
        categories=(),
        reconciled=False,
        group=PACKAGE_GROUP,
        columns=(
            PrinterColumn("Scheme", ".spec.scheme"),
            PrinterColumn("Host", ".spec.host"),
            PrinterColumn("Port", ".spec.port", type="integer"),
        ),
    )


PACKAGE_KINDS: Final[tuple[ResourceClass, ...]] = (GatewayClassConfig, GatewayConfig, ExternalBackend)
