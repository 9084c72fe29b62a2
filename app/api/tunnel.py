"""Tunnel and TunnelConfiguration: a remotely managed Cloudflare Tunnel, its token Secret, and its ingress rules."""

from __future__ import annotations

import re
from typing import Annotated, Final, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.meta import Status
from app.api.refs import AccountReference, LocalObjectReference, Refers
from app.api.resource import Resource
from app.api.text import NAME_SCHEMA, PRINTABLE_ASCII, NameCheck, TextCheck

TUNNEL_NAME_MAX: Final = 255
TOKEN_KEY: Final = "TUNNEL_TOKEN"
"""The key of the credentials Secret that holds the tunnel's token (what `cloudflared tunnel run` reads)."""
CATCH_ALL_404: Final = "http_status:404"

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_HOST_PORT = r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]"
_SERVICES: Final = (
    re.compile(rf"^https?://({_HOST_PORT})(:\d{{1,5}})?(/\S*)?$"),
    re.compile(rf"^(tcp|ssh|rdp|smb)://({_HOST_PORT}):\d{{1,5}}$"),
    re.compile(r"^unix(\+tls)?:/\S+$"),
    re.compile(r"^http_status:[1-5]\d\d$"),
    re.compile(r"^(hello_world|bastion|socks5)$"),
)
SERVICE_HELP: Final = (
    "a service is http://host[:port][/path], https://..., tcp://host:port (or ssh://, rdp://, smb://), "
    "unix:/path/to/socket, unix+tls:/path, http_status:<code>, hello_world, bastion or socks5"
)


def service_problem(service: str) -> str | None:
    """Why cloudflared could not parse `service`, or None."""
    if any(pattern.match(service) for pattern in _SERVICES):
        port = re.search(r":(\d{1,5})(/|$)", service.split("://", 1)[-1])
        if port is not None and not 0 < int(port.group(1)) <= 65535 and "://" in service:
            return f"port {port.group(1)} is out of range (1-65535)"
        return None
    return SERVICE_HELP


def hostname_problem(hostname: str) -> str | None:
    """Why `hostname` is not a host name an ingress rule can match (exact, or `*.` and a name), or None."""
    name = hostname.lower().removeprefix("*.")
    if name == "*":
        return None
    labels = name.split(".")
    if len(name) > 253 or len(labels) < 2:
        return "a hostname is a fully qualified name such as app.example.com, or *.example.com"
    for label in labels:
        if not _LABEL.match(label):
            return f"label {label!r} is not a DNS label (letters, digits and '-', at most 63)"
    return None


# ---- Tunnel ------------------------------------------------------------------------------------------------------


class TunnelSpec(KflareModel):
    """The tunnel's name, its account, and the Secret its token is written to."""

    name: Annotated[str, Field(min_length=1, max_length=TUNNEL_NAME_MAX, json_schema_extra=NAME_SCHEMA), NameCheck]
    """Name of the tunnel in Cloudflare. Changing it renames the tunnel in place."""
    account_ref: AccountReference
    """The CloudflareAccount the tunnel belongs to."""
    # a parent, watched: a token Secret edited by hand is restored
    credentials_secret_ref: Annotated[LocalObjectReference, Refers("Secret")]
    """The Secret, in the same namespace, kflare writes the tunnel's token to (key `TUNNEL_TOKEN`), for cloudflared
    (`cloudflared tunnel run` reads `TUNNEL_TOKEN` from its environment). kflare creates and owns it; a Secret of
    that name it does not own is never overwritten."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if _UUID.match(name):
            raise PydanticCustomError("tunnel_name", "a tunnel name cannot be a UUID: cloudflared takes it for an ID")
        if any(c in "\r\n\t" for c in name) or name != name.strip():
            raise PydanticCustomError("tunnel_name", "a tunnel name has no line breaks, tabs or surrounding spaces")
        return name


class TunnelMetadata(KflareModel):
    """What Cloudflare reported of the tunnel."""

    tunnel_id: Annotated[str, Field(max_length=64)] | None = None
    """Cloudflare tunnel ID (a UUID); hostnames point at `<tunnelID>.cfargotunnel.com`."""
    status: Annotated[str, Field(max_length=32)] | None = None
    """Health at the last look: inactive (no connector yet), healthy, degraded or down (all connectors gone)."""


class TunnelStatus(Status):
    """What kflare last observed of the tunnel."""

    cloudflare_metadata: TunnelMetadata | None = None
    """IDs and read-only data from Cloudflare."""
    # a parent too while it differs from the spec's: the token is removed from it
    credentials_secret_name: Annotated[str, Field(max_length=253), Refers("Secret")] | None = None
    """The Secret kflare last wrote the token to."""


class Tunnel(Resource[TunnelSpec, TunnelStatus]):
    """Tunnel manages a remotely managed Cloudflare Tunnel and the Secret holding its token."""

    info = KindInfo(
        kind="Tunnel",
        rank=100,
        permissions=(
            Permission(
                "Account · Cloudflare Tunnel · Edit",
                "to create, rename and delete tunnels and read their tokens and connections",
            ),
        ),
        claim_label="kflare.dev/tunnel-id",
        plural="tunnels",
        short_names=("cftunnel",),
        columns=(
            PrinterColumn("Tunnel", ".spec.name"),
            PrinterColumn("Tunnel ID", ".status.cloudflareMetadata.tunnelID"),
            PrinterColumn("CF Status", ".status.cloudflareMetadata.status"),
        ),
        immutable=("accountRef",),
    )


# ---- TunnelConfiguration -----------------------------------------------------------------------------------------


class AccessSettings(KflareModel):
    """Require a Cloudflare Access token in front of the origin."""

    required: bool | None = None
    """Refuse requests without a valid Access token."""
    team_name: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=255), TextCheck]
    """The Zero Trust team (organisation) name."""
    aud_tag: (
        Annotated[
            list[Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=255), TextCheck]],
            Field(max_length=32),
        ]
        | None
    ) = None
    """Application audience tags accepted."""


Seconds = Annotated[int, Field(ge=0, le=86400)]


class OriginRequest(KflareModel):
    """How cloudflared talks to the origin of a rule (cloudflared's `originRequest`)."""

    http_host_header: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=255), NameCheck] | None = None
    """Host header sent to the origin."""
    origin_server_name: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=255), NameCheck] | None = None
    """Name the origin's TLS certificate is checked against."""
    no_tls_verify: bool | None = None
    """Accept any certificate from the origin."""
    http2_origin: bool | None = None
    """Talk HTTP/2 to the origin."""
    disable_chunked_encoding: bool | None = None
    """Disable chunked transfer encoding (for WSGI servers and the like)."""
    connect_timeout: Seconds | None = None
    """Seconds to establish a TCP connection to the origin (cloudflared's default: 30)."""
    tls_timeout: Seconds | None = None
    """Seconds for the TLS handshake with the origin (default: 10)."""
    tcp_keep_alive: Seconds | None = None
    """Seconds between TCP keep-alive probes to the origin (default: 30)."""
    keep_alive_timeout: Seconds | None = None
    """Seconds an idle connection to the origin is kept (default: 90)."""
    keep_alive_connections: Annotated[int, Field(ge=0, le=10000)] | None = None
    """Idle connections to the origin kept open (default: 100)."""
    no_happy_eyeballs: bool | None = None
    """Do not fall back from IPv6 to IPv4 (or back) when dialling the origin."""
    ca_pool: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=4096), TextCheck] | None = None
    """Path, in the cloudflared container, of the CA certificates the origin's certificate is checked against."""
    proxy_type: Annotated[str, Field(max_length=16, pattern=r"^(|socks)$")] | None = None
    """`socks` makes cloudflared a SOCKS5 proxy for the rule."""
    match_sn_ito_host: bool | None = Field(default=None, alias="matchSNItoHost")
    """Send the request's host name as the TLS server name to the origin."""
    access: AccessSettings | None = None
    """Require a Cloudflare Access token."""


class IngressRule(KflareModel):
    """One rule: requests for `hostname` (and `path`) go to `service`."""

    hostname: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=253), NameCheck]
    """Host name the rule matches: exact (`app.example.com`) or a wildcard (`*.example.com`)."""
    path: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=1024), TextCheck] | None = None
    """Regular expression the request's path must match."""
    service: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=1024), TextCheck]
    """Where matching requests go: `http://svc.ns:80`, `https://...`, `tcp://db:5432`, `unix:/path`,
    `http_status:404`..."""
    origin_request: OriginRequest | None = None
    """How cloudflared talks to the service."""

    @field_validator("hostname")
    @classmethod
    def _check_hostname(cls, hostname: str) -> str:
        problem = hostname_problem(hostname)
        if problem is not None:
            raise PydanticCustomError("hostname", "{problem}", {"problem": problem})
        return hostname

    @field_validator("path")
    @classmethod
    def _check_path(cls, path: str | None) -> str | None:
        if path is not None:
            try:
                re.compile(path)
            except re.error as exc:
                raise PydanticCustomError("path", "not a regular expression: {error}", {"error": str(exc)}) from None
        return path

    @field_validator("service")
    @classmethod
    def _check_service(cls, service: str) -> str:
        problem = service_problem(service)
        if problem is not None:
            raise PydanticCustomError("service", "{problem}", {"problem": problem})
        return service

    @property
    def catch_all(self) -> bool:
        return self.hostname == "*" and self.path is None


class TunnelConfigurationSpec(KflareModel):
    """The whole ingress configuration of a tunnel: rules in order (the first that matches wins), then
    `defaultService` for everything else."""

    tunnel_ref: Annotated[LocalObjectReference, Refers("Tunnel")]
    """The Tunnel, in the same namespace, this configuration is for."""
    ingress: Annotated[list[IngressRule], Field(min_length=1, max_length=1000)]
    """Rules in order; the first that matches a request wins."""
    default_service: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=1024), TextCheck] = (
        CATCH_ALL_404
    )
    """Where requests no rule matches go: the last, catch-all rule."""

    @field_validator("default_service")
    @classmethod
    def _check_default(cls, service: str) -> str:
        problem = service_problem(service)
        if problem is not None:
            raise PydanticCustomError("service", "{problem}", {"problem": problem})
        return service

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        problems = Problems()
        for index, rule in enumerate(self.ingress):
            if rule.catch_all:
                problems.add(
                    ("ingress", index, "hostname"),
                    "this rule matches every request, so no rule after it would ever match, and defaultService is "
                    "always the last rule: put its service in defaultService instead",
                    rule.hostname,
                )
        problems.raise_if_any(type(self).__name__)
        return self

    def hostnames(self) -> list[str]:
        return list(dict.fromkeys(rule.hostname.lower() for rule in self.ingress if rule.hostname != "*"))


class TunnelConfigurationMetadata(KflareModel):
    """What Cloudflare reported of the configuration."""

    tunnel_id: Annotated[str, Field(max_length=64)] | None = None
    """The tunnel the configuration was last written to."""
    version: int | None = None
    """Cloudflare's version of the configuration; it grows with every write."""


class TunnelConfigurationStatus(Status):
    """What kflare last observed of the configuration."""

    cloudflare_metadata: TunnelConfigurationMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class TunnelConfiguration(Resource[TunnelConfigurationSpec, TunnelConfigurationStatus]):
    """TunnelConfiguration manages the whole ingress configuration of a Tunnel."""

    info = KindInfo(
        kind="TunnelConfiguration",
        rank=110,
        permissions=(Permission("Account · Cloudflare Tunnel · Edit", "to write a tunnel's ingress configuration"),),
        claim_label="kflare.dev/configured-tunnel-id",
        plural="tunnelconfigurations",
        short_names=("cftunnelconfig",),
        columns=(
            PrinterColumn("Tunnel", ".spec.tunnelRef.name"),
            PrinterColumn("Version", ".status.cloudflareMetadata.version", type="integer"),
        ),
        immutable=("tunnelRef",),
    )


def covers(domain: str, hostname: str) -> bool:
    """Whether a DNS name (a zone, a record) serves `hostname` (exact, or `*.` and a name)."""
    domain, host = domain.rstrip(".").lower(), hostname.rstrip(".").lower()
    if domain == host:
        return True
    return host.endswith("." + domain) if not domain.startswith("*.") else host.endswith(domain[1:])


def uncovered_hostnames(hostnames: list[str], zones: list[str], records: list[str]) -> list[str]:
    """The hostnames no zone of the tunnel's account contains and no DNS record names: requests for them can
    never reach the tunnel."""
    out = []
    for host in hostnames:
        zone_ok = any(covers(zone, host) for zone in zones)
        record_ok = any(record.rstrip(".").lower() == host.rstrip(".").lower() for record in records)
        if not (zone_ok or record_ok):
            out.append(host)
    return out
