"""Every flag of `kflare run`, from the command line or from `KFLARE_*` environment variables.

Flag names follow the Go controller's (`--drift-check-interval`, `--reconcile-timeout`, ...), and durations take its
syntax (`30m`, `1h30m`, `0s`), so a chart's values and a Deployment's args carry over unchanged.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BeforeValidator, Field, Json, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.api.constants import DeletionPolicy

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object) -> timedelta:
    """A Go duration (`1h30m`, `90s`, `0s`), a number of seconds, or a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    text = str(value).strip()
    if text in ("", "0"):
        return timedelta(0)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"invalid duration {value!r}: use a form such as 90s, 30m or 1h30m")
    return timedelta(seconds=total)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class LogFormat(StrEnum):
    JSON = "json"
    TEXT = "text"


def _log_format(value: object) -> object:
    # zap's name for the human-readable encoder, as the Go controller's chart passes it.
    return LogFormat.TEXT if value == "console" else value


def _zap_level(value: object) -> str:
    """zap's levels as Python's: a verbosity N >= 1 is zap's debug-N, which Python's logging has one level for."""
    text = str(value).strip().lower()
    if text.isdigit() and int(text) > 0:
        return "debug"
    return {"panic": "critical", "dpanic": "critical", "fatal": "critical", "warn": "warning"}.get(text, text)


LogLevel = Annotated[Literal["debug", "info", "warning", "error", "critical"], BeforeValidator(_zap_level)]
TimeEncoding = Literal["epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KFLARE_", extra="forbid")

    kubeconfig: Path | None = Field(None, description="kubeconfig file; in a Pod the in-cluster config is used")
    namespace: str = Field(
        "kflare-system", description="namespace of the leader Lease (the chart sets the release namespace)"
    )
    leader_elect: bool = Field(False, description="only the holder of the Lease reconciles")
    lease_name: str = Field(
        # The Go controller's lease: running both against one cluster never makes two leaders.
        "a634e97e.kflare.dev",
        description="name of the leader election Lease",
    )
    # 12 s, not the Go controller's 15 s: a standby takes over one lease after the leader's last renewal, and a
    # leader killed right after renewing would otherwise be replaced only after 15 s and some. A Lease written by the
    # Go controller is judged by the duration it records.
    lease_duration: Duration = Field(timedelta(seconds=12), description="how long a leader's Lease holds it")
    renew_deadline: Duration = timedelta(seconds=10)
    retry_period: Duration = timedelta(seconds=2)
    drift_check_interval: Duration = Field(
        timedelta(0), description="check each resource against Cloudflare this long after it synced; 0s is off"
    )
    reconcile_timeout: Duration = Field(timedelta(minutes=5), description="bound on one reconcile; 0s is off")
    shutdown_delay: Duration = Field(
        timedelta(0),
        description="after SIGTERM, how long the listeners (the webhook above all) keep answering once reconciling"
        " has stopped and /readyz fails, while the pod leaves its Services' endpoints: a request the API server"
        " sends meanwhile is answered rather than refused; the chart sets 5s",
    )
    default_deletion_policy: DeletionPolicy = DeletionPolicy.DELETE
    default_account_namespaces: Literal["All", "None"] = Field(
        "All",
        description="which namespaces may use (and adopt through) a CloudflareAccount whose spec.allowedNamespaces is"
        " unset: All (as the Go controller) or None (each account says whom it serves)",
    )
    granted_namespaces: str = Field(
        "",
        description="comma-separated namespaces whose Secrets and ConfigMaps kflare may read (and where Gateways may"
        " have data planes of their own), as the chart's rbac.namespaces grants them; empty is every namespace",
    )
    resync_period: Duration = Field(timedelta(hours=10), description="re-reconcile everything this often")
    dns_batch_size: int = Field(
        0,
        ge=0,
        description="DNS writes of one zone sent per call; 0 is the zone plan's cap (200 on Free), 1 sends each alone",
    )
    cloudflare_api_url: str = Field(
        "https://api.cloudflare.com/client/v4", description="base URL of Cloudflare's v4 API"
    )
    cloudflare_rate_limit: int = Field(
        1200, gt=0, description="calls Cloudflare allows each token (or user) per rate-limit window"
    )
    cloudflare_rate_window: Duration = Field(timedelta(minutes=5), description="Cloudflare's rate-limit window")
    cloudflare_budget_share: float = Field(
        0.8, gt=0, le=1, description="share of each token's 1,200 calls per 5 minutes that kflare may use"
    )
    health_probe_bind_address: str = Field(":8081", description="host:port of the probes (plain HTTP); 0 is off")
    metrics_bind_address: str = Field(":8080", description="host:port of the metrics listener; 0 is off")
    webhook_bind_address: str = Field(
        ":9443", description="host:port of the webhook listener (TLS); a host alone keeps the port; 0 is off"
    )
    webhook_port: int | None = Field(
        None, ge=0, le=65535, description="port of the webhook listener, replacing the bind address's; 0 is off"
    )
    webhook_cert_dir: Path | None = None
    webhook_cert_secret: str | None = Field(
        None,
        description="Secret (in --namespace) where kflare keeps the webhook and metrics listeners' certificate itself:"
        " made when missing, renewed before its end, written into --webhook-cert-dir; unset: the files there are"
        " someone else's (cert-manager's)",
    )
    webhook_cert_names: str = Field(
        "", description="comma-separated DNS names the kept certificate is for (the webhook and metrics Services')"
    )
    webhook_configuration: str | None = Field(
        None,
        description="ValidatingWebhookConfiguration whose webhooks' caBundle kflare keeps to the kept certificate's CA",
    )
    webhook_body_timeout: Duration = Field(
        timedelta(seconds=10),
        gt=timedelta(0),
        description="the webhook answers 408 to a review whose body has not arrived within this long, and 503 to one"
        " that waited this long for its turn",
    )
    http_header_timeout: Duration = Field(
        timedelta(seconds=10),
        description="a listener closes a connection that has not sent a whole request's headers (and done its TLS"
        " handshake) within this long",
    )
    http_max_connections: int = Field(256, gt=0, description="open connections each listener accepts at most")
    gateway_enabled: bool = Field(
        False, description="serve the cloudflare-tunnel Gateway API class (its CRDs must exist)"
    )
    gateway_controller_names: str = Field(
        "",
        description="comma-separated controllerNames whose GatewayClasses the class serves besides its own"
        " kflare.dev/gateway-controller",
    )
    gateway_tunnel_gateway_package: bool = Field(
        False,
        description="read cloudflare-tunnel-gateway-controller's kinds (group cf.k8s.lex.la: GatewayClassConfig,"
        " GatewayConfig, ExternalBackend) as kflare's equivalents, and serve the GatewayClasses of its controllerName"
        " cf.k8s.lex.la/tunnel-controller (docs/migrating-from-tunnel-gateway.md)",
    )
    gateway_xds_bind_address: str = Field(
        ":18000",
        description="host:port of the xDS listener (gRPC, delta ADS) the data plane's Envoy holds a stream"
        " open to (with the class on); 0 is off",
    )
    gateway_xds_token_file: Path | None = Field(
        None, description="file holding the token Envoy presents to the xDS listener (the chart mounts a Secret)"
    )
    gateway_xds_cert_dir: Path | None = Field(
        None,
        description="directory of the tls.crt and tls.key the xDS listener serves (reloaded on change); unset is"
        " plaintext gRPC, for loopback only",
    )
    gateway_xds_client_ca_file: Path | None = Field(
        None,
        description="CA (PEM) whose signed client certificate Envoy must present to the xDS listener (mutual TLS,"
        " with --gateway-xds-cert-dir); unset asks for no client certificate",
    )
    gateway_xds_host: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9]([-.A-Za-z0-9]*[A-Za-z0-9])?$",
        description="the name data planes reach the xDS listener by (its Service: <name>.<namespace>.svc); set, the"
        " controller makes and keeps the class's material itself: the Secrets of --gateway-plane-xds-secret (token,"
        " mutual TLS, the shared plane's Envoy bootstrap) and --gateway-plane-origin-secret (the origin certificate),"
        " and writes the listener's token, CA and certificate into --gateway-xds-cert-dir, which --gateway-xds-"
        "token-file and --gateway-xds-client-ca-file then default into",
    )
    gateway_data_plane_address: str = Field(
        "0.0.0.0:8080", description="host:port Envoy listens on for cloudflared, in the data-plane pod"
    )
    gateway_data_plane_tls_port: int = Field(
        8443,
        ge=0,
        lt=65536,
        description="port of Envoy's TLS listener for cloudflared's HTTP/2 (gRPC hostnames are sent there: cloudflared"
        " has no cleartext HTTP/2), on the host of --gateway-data-plane-address; 0 is off",
    )
    gateway_data_plane_https_port: int = Field(
        10443,
        ge=0,
        lt=65536,
        description="port of Envoy's TLS listener for clients reaching the data plane directly (in the cluster,"
        " through its Service) rather than through Cloudflare: it serves each HTTPS Gateway listener's certificate by"
        " SNI, on the host of --gateway-data-plane-address; 0 is off",
    )
    gateway_origin_tls_dir: str = Field(
        "/etc/kflare/origin-tls",
        description="directory, in the data-plane pod, of the origin certificate of that listener: tls.crt and"
        " tls.key (Envoy's) and ca.crt (cloudflared's caPool); the chart generates them",
    )
    gateway_origin_server_name: str = Field(
        "kflare-data-plane",
        description="the name the origin certificate is for, which cloudflared checks (originServerName)",
    )
    gateway_origin_url: str | None = Field(
        None,
        description="the data plane as cloudflared reaches it, the service of the tunnel's ingress rules; unset is"
        " http://localhost:<port of --gateway-data-plane-address> (cloudflared and Envoy share the data-plane pod)",
        pattern=r"^https?://[^\s/]+$",
    )
    gateway_allow_external_name_services: bool = Field(
        False,
        description="let routes on the class's shared data plane send to ExternalName Services (CVE-2021-25740: off,"
        " they are refused, ResolvedRefs=False); a Gateway with a plane of its own asks its GatewayParameters'"
        " allowExternalNameServices",
    )
    gateway_namespace_label: str | None = Field(
        None,
        description="namespace label whose value a namespace's routes must own their hostnames under"
        " (namespace.cozystack.io/host, say), for hostnames in no zone a kflare Zone manages (the Zone decides"
        " those); set, a namespace without the label publishes none of them; unset is no such rule",
    )
    gateway_planes_per_namespace: int = Field(
        3,
        ge=0,
        le=1000,
        description="Gateways per namespace that may have a data plane (tunnel, Envoy and cloudflared) of their own"
        " (spec.infrastructure.parametersRef naming a GatewayParameters, or with --gateway-tunnel-gateway-package a"
        " GatewayConfig: the two counted together); the oldest get theirs, the others are refused; 0 is none",
    )
    gateway_default_parameters: str | None = Field(
        None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="GatewayParameters (<namespace>/<name>) of a Gateway of the class that names none in"
        " spec.infrastructure.parametersRef: it gets a data plane of its own made of that one, within"
        " --gateway-planes-per-namespace (beyond it, or while that GatewayParameters is missing, the shared plane"
        " serves it); unset: such a Gateway is served by the shared plane",
    )
    gateway_plane_envoy_image: str = Field(
        "envoyproxy/envoy:v1.40.0", min_length=1, description="Envoy image of a Gateway's own data plane"
    )
    gateway_plane_cloudflared_image: str = Field(
        "cloudflare/cloudflared:2026.8.0", min_length=1, description="cloudflared image of a Gateway's own data plane"
    )
    gateway_plane_xds_secret: str = Field(
        "kflare-xds",
        min_length=1,
        description="Secret, in --namespace, of the Envoy bootstrap and xDS client certificate a Gateway's own data"
        " plane is given a copy of (the chart's)",
    )
    gateway_plane_origin_secret: str = Field(
        "kflare-origin-tls",
        min_length=1,
        description="Secret, in --namespace, of the origin certificate a Gateway's own data plane is given a copy of"
        " (the chart's)",
    )
    gateway_plane_network_policy: bool = Field(
        False,
        description="give a Gateway's own data plane a NetworkPolicy: connections in to its metrics ports only; out"
        " to DNS, the xDS listener, pods of any namespace and Cloudflare's edge (the chart's, for the shared plane)",
    )
    gateway_plane_resources: Json[dict[str, dict[str, str]]] | None = Field(
        None,
        description="resources (JSON, as a container's: requests and limits) of the Envoy of a Gateway's own data"
        " plane whose GatewayParameters gives none",
    )
    metrics_secure: bool = True
    metrics_cert_path: Path | None = None
    enable_http2: bool = Field(
        False,
        description="the Go controller's switch for HTTP/2 on the metrics and webhook listeners; kflare's listeners"
        " speak HTTP/1.1 only (as the Go controller's do by default), so true is accepted with a warning",
    )
    log_level: LogLevel = Field("info", description="debug, info, warning, error or critical")
    log_format: Annotated[LogFormat, BeforeValidator(_log_format)] = Field(
        LogFormat.JSON, description="json (one object per line) or text (console is a synonym)"
    )
    # The Go controller's logging flags (controller-runtime's zap options), so its Deployments' args carry over.
    zap_devel: bool = Field(
        False,
        description="development logging, as the Go controller's: debug level, text lines and stack traces from"
        " warnings on, each unless set by its own flag",
    )
    zap_log_level: LogLevel | None = Field(
        None, description="the Go controller's name for --log-level (debug, info, error, or a verbosity N: debug)"
    )
    zap_encoder: Annotated[LogFormat, BeforeValidator(_log_format)] | None = Field(
        None, description="the Go controller's name for --log-format (json or console)"
    )
    zap_stacktrace_level: LogLevel | None = Field(
        None,
        description="lines at this level or above carry the stack of the call that logged them (info, error, panic)",
    )
    zap_time_encoding: TimeEncoding | None = Field(
        None, description="how a line's time is written: epoch, millis, nano, iso8601, rfc3339 or rfc3339nano"
    )

    @model_validator(mode="after")
    def _kept_xds_files(self) -> Self:
        """With --gateway-xds-host the controller writes the listener's files itself, into --gateway-xds-cert-dir."""
        if self.gateway_xds_host is None:
            return self
        if self.gateway_xds_cert_dir is None:
            raise ValueError(
                "--gateway-xds-host needs --gateway-xds-cert-dir, where the controller writes the material"
            )
        if self.gateway_xds_token_file is None:
            self.gateway_xds_token_file = self.gateway_xds_cert_dir / "token"
        if self.gateway_xds_client_ca_file is None:
            self.gateway_xds_client_ca_file = self.gateway_xds_cert_dir / "ca.crt"
        return self

    @model_validator(mode="after")
    def _zap(self) -> Self:
        """The zap flags set what the log flags set; given both, they must agree."""
        given = self.model_fields_set
        for zap, own in (("zap_log_level", "log_level"), ("zap_encoder", "log_format")):
            value = getattr(self, zap)
            if value is None:
                continue
            if own in given and getattr(self, own) != value:
                raise ValueError(f"--{zap.replace('_', '-')} and --{own.replace('_', '-')} disagree: give one")
            setattr(self, own, value)
        if self.zap_devel:
            if not {"log_level", "zap_log_level"} & given:
                self.log_level = "debug"
            if not {"log_format", "zap_encoder"} & given:
                self.log_format = LogFormat.TEXT
            if "zap_stacktrace_level" not in given:
                self.zap_stacktrace_level = "warning"
        return self

    @field_validator(
        "health_probe_bind_address",
        "metrics_bind_address",
        "webhook_bind_address",
        "gateway_xds_bind_address",
        "gateway_data_plane_address",
    )
    @classmethod
    def _check_address(cls, address: str, info: ValidationInfo) -> str:
        if info.field_name == "webhook_bind_address" and ":" not in address and address != "0":
            return address  # a host alone: the port comes from --webhook-port or the default
        split_bind_address(address)
        return address

    @property
    def drift_checks_enabled(self) -> bool:
        return self.drift_check_interval > timedelta(0)

    @property
    def granted_namespace_set(self) -> frozenset[str] | None:
        """`--granted-namespaces` as a set; None: every namespace."""
        names = frozenset(n.strip() for n in self.granted_namespaces.split(",") if n.strip())
        return names or None

    @property
    def webhook_address(self) -> tuple[str, int] | None:
        """Where the webhook listens, or None when it is off. `--webhook-port` (the older flag, which the chart
        and the Go controller's manifests pass) replaces the port of `--webhook-bind-address`."""
        address = self.webhook_bind_address
        if ":" not in address and address != "0":
            address = f"{address}:{WEBHOOK_PORT}"
        found = split_bind_address(address)
        if self.webhook_port is None:
            return found
        if self.webhook_port == 0:
            return None
        host = found[0] if found is not None else ALL_ADDRESSES
        return host, self.webhook_port

    @property
    def gateway_controller_name_set(self) -> frozenset[str]:
        """The controllerNames the class answers to: its own, --gateway-controller-names, and with
        --gateway-tunnel-gateway-package the package's."""
        names = {n.strip() for n in self.gateway_controller_names.split(",") if n.strip()}
        names.add(GATEWAY_CONTROLLER_NAME)
        if self.gateway_tunnel_gateway_package:
            names.add(PACKAGE_CONTROLLER_NAME)
        return frozenset(names)

    @property
    def gateway_default_parameters_key(self) -> tuple[str, str] | None:
        """--gateway-default-parameters as (namespace, name)."""
        if not self.gateway_default_parameters:
            return None
        namespace, _, name = self.gateway_default_parameters.partition("/")
        return namespace, name


WEBHOOK_PORT = 9443
GATEWAY_CONTROLLER_NAME = "kflare.dev/gateway-controller"
PACKAGE_CONTROLLER_NAME = "cf.k8s.lex.la/tunnel-controller"
"""As `reconcilers.gateway.kinds` has them (settings sit beside the reconcilers and import none of them)."""
ALL_ADDRESSES = "0.0.0.0"  # noqa: S104 (a Pod listens on all its addresses)


def split_bind_address(address: str) -> tuple[str, int] | None:
    """`:8080`, `127.0.0.1:8080` or `[::1]:8080` as (host, port); `0` turns a listener off, as in
    controller-runtime. A bad address raises ValueError."""
    if address in ("0", ""):
        return None
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"invalid bind address {address!r}: use host:port, :port or 0")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"invalid bind address {address!r}: write an IPv6 address in brackets, as [::1]:8080")
    return (host or ALL_ADDRESSES, int(port))
