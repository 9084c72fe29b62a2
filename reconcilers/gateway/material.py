"""The Gateway class's generated material, made and kept by the controller in two Secrets of its namespace, so
that the chart carries none (Argo CD renders charts with `helm template`, where a chart that generates a key makes
a new one on every sync, and the app never shows Synced):

- the xDS Secret (`--gateway-plane-xds-secret`): the installation's xDS token, a CA, the xDS listener's certificate
  for `--gateway-xds-host`, Envoy's client certificate, and the shared data plane's Envoy bootstrap, which carries
  the token (a bootstrap cannot read a file or variable into the stream's metadata);
- the origin Secret (`--gateway-plane-origin-secret`): the certificate Envoy's TLS listener serves to cloudflared,
  for `--gateway-origin-server-name`, and its CA (cloudflared's caPool).

The first replica that finds a Secret missing, incomplete or near its end makes it (`app.kube.kept`); the others
read it. What an existing Secret holds is kept as it is, a chart's from an earlier release included, so an upgrade
rotates nothing under running data planes; only the bootstrap is rewritten when the xDS address changed. Each
replica writes the listener's part (token, CA, certificate and key) into `--gateway-xds-cert-dir`, which the xDS
listener reloads on change, and looks again every CHECK_EVERY seconds. To rotate, delete both Secrets and restart the
controller, then the data plane (docs/gateway.md)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final

from pydantic import JsonValue

from app.kube.client import KubeClient, KubeError
from app.kube.kept import Keeper, keep_secret, replace_files
from app.pki import CertificateAuthority, names_of, not_after
from app.tls import self_signed
from reconcilers.gateway import envoy
from reconcilers.gateway.envoy import EnvoyJSON

log = logging.getLogger(__name__)

DAYS: Final = 3650
RENEW_BEFORE: Final = dt.timedelta(days=30)
XDS_KEYS: Final = ("token", "ca.crt", "tls.crt", "tls.key", "client.crt", "client.key")
ORIGIN_KEYS: Final = ("ca.crt", "tls.crt", "tls.key")
LISTENER_FILES: Final = ("token", "ca.crt", "tls.key", "tls.crt")
"""What the xDS listener reads from its directory; the certificate last (a reload keys on it)."""
ADMIN_PORT: Final = 9901
READY_PORT: Final = 9902
TUNNEL_METRICS_PORT: Final = 2000
CLOUDFLARED_METRICS: Final = 20000
ENVOY_DIR: Final = "/etc/envoy"


def _static_cluster(name: str, port: int) -> EnvoyJSON:
    endpoint: EnvoyJSON = {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": port}}}}
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [endpoint]}]},
    }


def _gate(name: str, port: int, cluster: str, paths: tuple[str, ...]) -> EnvoyJSON:
    """A listener on the pod's `port` passing GET of `paths` to `cluster`, and answering anything else 404."""
    get: list[JsonValue] = [{"name": ":method", "string_match": {"exact": "GET"}}]
    routes: list[JsonValue] = [{"match": {"path": p, "headers": get}, "route": {"cluster": cluster}} for p in paths]
    routes.append({"match": {"prefix": "/"}, "direct_response": {"status": 404}})
    hcm: EnvoyJSON = {
        "@type": envoy.HCM,
        "stat_prefix": name.removeprefix("kflare-").replace("-", "_"),
        "route_config": {"name": name, "virtual_hosts": [{"name": name, "domains": ["*"], "routes": routes}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": envoy.ROUTER}}],
    }
    filters: list[JsonValue] = [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]
    return {
        "name": name,
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},  # noqa: S104 (the pod's port)
        "filter_chains": [{"filters": filters}],
    }


def data_plane_bootstrap(xds_host: str, xds_port: int, token: str) -> envoy.Bootstrap:
    """The shared data plane's Envoy bootstrap (each Gateway's own plane gets a copy with its own credential):
    kflare's delta ADS over mutual TLS, the files under /etc/envoy. The kubelet probes the pod's address and the
    admin interface stays on loopback (it can stop Envoy), so a listener of its own passes GET /ready and GET
    /stats/prometheus to the admin and nothing else; cloudflared's metrics listener also serves its configuration,
    diagnostics and pprof with no switch to turn them off, so it listens on loopback and the pod's port 2000 passes
    GET /ready and GET /metrics to it and nothing else."""
    out = envoy.bootstrap_config(
        node_id="data-plane",
        xds_host=xds_host,
        xds_port=xds_port,
        token=token,
        admin_port=ADMIN_PORT,
        ca_file=f"{ENVOY_DIR}/ca.crt",
        client_cert=(f"{ENVOY_DIR}/client.crt", f"{ENVOY_DIR}/client.key"),
    )
    static = out["static_resources"]
    static["clusters"] += [
        _static_cluster("kflare-admin", ADMIN_PORT),
        _static_cluster("kflare-tunnel-metrics", CLOUDFLARED_METRICS),
    ]
    static["listeners"] = [
        _gate("kflare-readiness", READY_PORT, "kflare-admin", ("/ready", "/stats/prometheus")),
        _gate("kflare-tunnel-metrics", TUNNEL_METRICS_PORT, "kflare-tunnel-metrics", ("/ready", "/metrics")),
    ]
    return out


def _good(pem: bytes, names: set[str], now: dt.datetime) -> bool:
    try:
        return not_after(pem) - now > RENEW_BEFORE and names <= names_of(pem)
    except ValueError:
        return False


@dataclass
class GatewayMaterial(Keeper):
    """The two Secrets and the listener's files; see the module's description."""

    WHAT: ClassVar[str] = "the Gateway class's xDS material"

    kube: KubeClient
    namespace: str
    xds_secret: str
    origin_secret: str
    xds_host: str
    xds_port: int
    server_name: str
    directory: Path
    failing: bool = False

    @property
    def xds_names(self) -> list[str]:
        return [self.xds_host, f"{self.xds_host}.cluster.local"] if self.xds_host.endswith(".svc") else [self.xds_host]

    def _xds_wanted(self, current: dict[str, bytes] | None) -> dict[str, bytes] | None:
        now = dt.datetime.now(dt.UTC)
        have = current or {}
        complete = all(have.get(k) for k in XDS_KEYS)
        if complete and _good(have["tls.crt"], {self.xds_host}, now) and _good(have["client.crt"], set(), now):
            token = have["token"].decode().strip()
            bootstrap = data_plane_bootstrap(self.xds_host, self.xds_port, token)
            try:
                same = json.loads(have.get("bootstrap.json") or b"null") == bootstrap
            except ValueError:
                same = False
            return None if same else {**have, "bootstrap.json": _dumps(bootstrap)}
        # The token is kept when there is one: data planes present it, and it is not what expired.
        token = have.get("token", b"").decode().strip() or secrets.token_urlsafe(30)
        ca = CertificateAuthority.create(f"kflare-xds-ca-{self.namespace}", days=DAYS)
        server_key, server = ca.issue(self.xds_host, hosts=self.xds_names, server=True, days=DAYS)
        client_key, client = ca.issue(f"kflare-data-plane-{self.namespace}", days=DAYS)
        return {
            "token": token.encode(),
            "ca.crt": ca.pem,
            "ca.key": ca.key_pem,
            "tls.crt": server,
            "tls.key": server_key,
            "client.crt": client,
            "client.key": client_key,
            "bootstrap.json": _dumps(data_plane_bootstrap(self.xds_host, self.xds_port, token)),
        }

    def _origin_wanted(self, current: dict[str, bytes] | None) -> dict[str, bytes] | None:
        have = current or {}
        if all(have.get(k) for k in ORIGIN_KEYS) and _good(
            have["tls.crt"], {self.server_name}, dt.datetime.now(dt.UTC)
        ):
            return None
        ca = CertificateAuthority.create(f"kflare-origin-ca-{self.namespace}", days=DAYS)
        key, cert = ca.issue(self.server_name, hosts=[self.server_name], server=True, days=DAYS)
        return {"ca.crt": ca.pem, "ca.key": ca.key_pem, "tls.crt": cert, "tls.key": key}

    async def ensure(self) -> None:
        """Make or complete both Secrets as needed, and write the listener's files."""
        labels = {"app.kubernetes.io/managed-by": "kflare", "app.kubernetes.io/component": "gateway"}
        xds, wrote = await keep_secret(self.kube, self.namespace, self.xds_secret, self._xds_wanted, labels=labels)
        if wrote:
            log.info("wrote the Gateway class's xDS material", extra={"secret": self.xds_secret})
        _, wrote = await keep_secret(
            self.kube, self.namespace, self.origin_secret, self._origin_wanted, labels=labels, tls=True
        )
        if wrote:
            log.info("wrote the data plane's origin certificate", extra={"secret": self.origin_secret})
        self.write(xds)

    def write(self, material: Mapping[str, bytes]) -> None:
        """The listener's files."""
        replace_files(self.directory, material, LISTENER_FILES)

    async def start(self) -> None:
        """The first `ensure`, before the xDS listener loads the files. When the Secrets cannot be read or written
        (the API server away, a role without Secrets), the listener starts on a random token and a self-signed
        certificate, which no data plane holds: it refuses every stream until `keep` succeeds (every RETRY
        seconds) and the files are rewritten, which the listener reloads."""
        try:
            await self.ensure()
        except (KubeError, OSError, ValueError, RuntimeError) as exc:
            self.failing = True
            log.error(
                "could not make or read the Gateway class's xDS material: %s; refusing data planes meanwhile", exc
            )
            cert, key = self_signed(self.xds_names)
            self.write({"token": secrets.token_urlsafe(30).encode(), "ca.crt": cert, "tls.crt": cert, "tls.key": key})


def _dumps(bootstrap: envoy.Bootstrap) -> bytes:
    return json.dumps(bootstrap, sort_keys=True, separators=(",", ":")).encode()
