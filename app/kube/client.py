"""A JSON client of the Kubernetes API on httpx.

The controller keeps objects as plain dicts (cheap to parse and to hold in the cache), so it calls the API by path
and parses JSON itself. In a Pod it needs nothing but the ServiceAccount's token and CA; outside a cluster (kflare
dev, tests, a laptop) it reads the kubeconfig with kubernetes_asyncio's loader, which knows every way a kubeconfig
authenticates (client certificates, tokens, exec plugins). That library is imported only then: its generated models
cost about 60 MiB of memory, more than the rest of the controller.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import httpx
import yaml
from h2.connection import H2Connection

from app.kube import metrics
from app.kube.identity import FIELD_MANAGER
from app.kube.turns import FairTurns
from app.proxy import ProxyEnvironment

log = logging.getLogger("kflare.kube")

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
MANAGED = {"fieldManager": FIELD_MANAGER}
"""Every write names kflare as its field manager (see `app.kube.identity`)."""
REQUEST_TIMEOUT = 30.0
IN_FLIGHT = 32
"""Requests (not watches) sent at once; the rest wait their turn, in order within their resource type and in
rotation between types (`app.kube.turns`). Thousands of writes at once (a burst of new resources) would otherwise
wait inside httpx's connection pool, which scans every waiting request against every connection each time one
finishes: at 5,000 objects that scan took the process' whole CPU. The API server answers no faster with more in
flight (about 165 metadata patches a second here with 32)."""
SKIPPING = 8
"""Connections beyond IN_FLIGHT, for the requests that skip the queue (a Lease, the metrics' access reviews)."""
CLOSED_STREAMS_KEPT = 1024
"""Closed streams an HTTP/2 connection remembers (h2's default is 65,536): 32 round trips of IN_FLIGHT streams."""
# h2 remembers how each closed stream of a connection ended, up to 65,536 of them (about 5 MiB on the connection to
# the API server, which lives as long as the process), to tell a late frame on a stream it reset from a protocol
# error; only the streams of the last few round trips can still see one. httpcore makes the connection, so the limit
# is set, once, where h2 reads it.
H2Connection.MAX_CLOSED_STREAMS = CLOSED_STREAMS_KEPT
UNQUEUED: Final = frozenset({"leases"})
"""Resources whose requests skip the queue: leader election renews its Lease within its deadline whatever the
backlog of other writes."""


def _flow(rt: ResourceType) -> str | None:
    """The queue a request of this resource type waits in; None: it skips the queue."""
    return None if rt.plural in UNQUEUED else rt.plural


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD = 60.0  # kubelet rotates projected tokens well before they expire; re-reading each minute keeps up


@dataclass(frozen=True)
class ResourceType:
    """Where a kind lives in the API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    optional: bool = False
    """An API the cluster may not serve yet (a CRD of a later bundle): until it does, its informer is synced and
    empty rather than holding every reconciler's readiness back."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base


SECRETS = ResourceType("", "v1", "secrets", "Secret")
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap")
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease")
EVENTS = ResourceType("events.k8s.io", "v1", "events", "Event")


class KubeError(Exception):
    """A reply outside 2xx, with the API server's Status reason and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


def _error(response: httpx.Response) -> KubeError:
    try:
        status = json.loads(response.content)
        return KubeError(response.status_code, str(status.get("reason", "")), str(status.get("message", "")))
    except (ValueError, AttributeError):
        return KubeError(response.status_code, response.reason_phrase, response.content[:500].decode(errors="replace"))


def unreachable(exc: Exception) -> KubeError:
    """A call that got no answer: status 0, so callers treat it like any other failed call."""
    return KubeError(0, "Unreachable", f"{type(exc).__name__}: {exc}")


AuthHeaders = Callable[[], Awaitable[dict[str, str]]]


class _ServiceAccountToken:
    """The Pod's projected token, re-read as kubelet rotates it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._token = ""
        self._read_at = 0.0

    async def __call__(self) -> dict[str, str]:
        if time.monotonic() - self._read_at > TOKEN_REREAD:
            self._token = (await asyncio.to_thread(self.path.read_text)).strip()
            self._read_at = time.monotonic()
        return {"Authorization": f"Bearer {self._token}"}


async def _no_auth() -> dict[str, str]:
    return {}


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").exists()


def _named(entries: list[JSON], name: str, field: str) -> JSON:
    found = next((e.get(field) or {} for e in entries if e.get("name") == name), None)
    if found is None:
        raise ValueError(f"the kubeconfig has no {field} named {name!r}")
    return dict(found)


def _pem(entry: JSON, key: str, base: Path) -> bytes | None:
    """`<key>-data` (base64) or `<key>` (a file, relative to the kubeconfig) of a kubeconfig entry."""
    if entry.get(f"{key}-data"):
        return base64.b64decode(str(entry[f"{key}-data"]))
    if entry.get(key):
        return (base / str(entry[key])).expanduser().read_bytes()
    return None


def _simple_kubeconfig(path: Path) -> KubeClient | None:
    """A client for a kubeconfig whose user is a client certificate or a token (kind, k3d, kflare dev and the tests);
    None for the rest (exec plugins, auth providers, several files), which the library reads."""
    if not path.is_file():
        return None
    document = yaml.safe_load(path.read_text()) or {}
    context = _named(document.get("contexts") or [], document.get("current-context", ""), "context")
    cluster = _named(document.get("clusters") or [], context.get("cluster", ""), "cluster")
    user = _named(document.get("users") or [], context.get("user", ""), "user")
    if set(user) - {
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
    }:
        return None
    base = path.parent
    ca = _pem(cluster, "certificate-authority", base)
    tls = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if cluster.get("insecure-skip-tls-verify"):
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    cert, key = _pem(user, "client-certificate", base), _pem(user, "client-key", base)
    if cert and key:
        # ssl loads a key pair only from files: write them where only this process can read, then remove them.
        with tempfile.TemporaryDirectory(prefix="kflare-kubeconfig-") as tmp:
            os.chmod(tmp, 0o700)
            (Path(tmp) / "c").write_bytes(cert)
            (Path(tmp) / "k").write_bytes(key)
            tls.load_cert_chain(Path(tmp) / "c", Path(tmp) / "k")
    auth: AuthHeaders = _no_auth
    if user.get("tokenFile"):
        auth = _ServiceAccountToken(base / user["tokenFile"])
    elif user.get("token"):
        token = str(user["token"])

        async def static() -> dict[str, str]:
            return {"Authorization": f"Bearer {token}"}

        auth = static
    return KubeClient(str(cluster["server"]), tls, auth, sni=cluster.get("tls-server-name"))


class KubeClient:
    """JSON requests by path. One per process; safe to share between tasks."""

    def __init__(
        self,
        host: str,
        verify: ssl.SSLContext,
        auth: AuthHeaders = _no_auth,
        *,
        sni: str | None = None,
        proxies: ProxyEnvironment | None = None,
    ) -> None:
        self.host = host.rstrip("/")
        # The API server through the proxy the environment names for it, as client-go decides (`app.proxy`): in a
        # cluster, NO_PROXY should cover the kubernetes Service's address.
        proxy = (proxies or ProxyEnvironment.from_environ()).proxy_for(self.host)
        self._auth = auth
        # A kubeconfig's tls-server-name: the name the server's certificate is checked against.
        self._extensions = {"sni_hostname": sni} if sni else {}
        # Requests go over HTTP/2 (one connection, IN_FLIGHT streams at once; HTTP/1.1 where the server does not
        # offer it), watches over HTTP/1.1 in a pool of their own. httpcore looks at every connection of a pool (a
        # syscall for each idle one) whenever a request of it starts or ends: with a connection per request in
        # flight and the watches (one per resource type, held for minutes) in one pool, that look took more than
        # 40 % of the process's CPU in a bulk apply; on one HTTP/2 connection a 4,000-record apply took half the CPU.
        requests = httpx.Limits(max_connections=IN_FLIGHT + SKIPPING, max_keepalive_connections=IN_FLIGHT + SKIPPING)
        self.http = httpx.AsyncClient(
            verify=verify, limits=requests, timeout=REQUEST_TIMEOUT, trust_env=False, http2=True, proxy=proxy
        )
        watches = httpx.Limits(max_connections=512, max_keepalive_connections=64)
        self.watches = httpx.AsyncClient(
            verify=verify, limits=watches, timeout=REQUEST_TIMEOUT, trust_env=False, proxy=proxy
        )
        self._turns = FairTurns(IN_FLIGHT)

    @classmethod
    async def connect(cls, kubeconfig: Path | None = None) -> KubeClient:
        if kubeconfig is None and in_cluster():
            host = os.environ["KUBERNETES_SERVICE_HOST"]
            port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if ":" in host:
                host = f"[{host}]"
            context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
            return cls(f"https://{host}:{port}", context, _ServiceAccountToken(SERVICE_ACCOUNT / "token"))
        return await cls._from_kubeconfig(kubeconfig)

    @classmethod
    async def _from_kubeconfig(cls, kubeconfig: Path | None) -> KubeClient:
        path = kubeconfig or Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config")
        simple = _simple_kubeconfig(path.expanduser())
        if simple is not None:
            return simple
        return await cls._from_library(kubeconfig)

    @classmethod
    async def _from_library(cls, kubeconfig: Path | None) -> KubeClient:
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        path = str(kubeconfig) if kubeconfig is not None else None
        await config.load_kube_config(config_file=path, client_configuration=configuration)
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if not configuration.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if configuration.cert_file:
            context.load_cert_chain(configuration.cert_file, configuration.key_file)

        async def auth() -> dict[str, str]:
            # Exec plugins and expiring tokens refresh through the loader's hook, called here as the library does.
            key = await configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
            return {"Authorization": str(key)} if key else {}

        return cls(str(configuration.host), context, auth, sni=configuration.tls_server_name or None)

    async def close(self) -> None:
        await self.http.aclose()
        await self.watches.aclose()

    def _url(self, path: str) -> str:
        return self.host + path

    @staticmethod
    def _params(query: Mapping[str, str | int | bool] | None) -> list[tuple[str, str | int | float | bool | None]]:
        return [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()]

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = REQUEST_TIMEOUT,
        flow: str | None = "",
    ) -> JSON:
        """The answer's JSON. `flow`: the queue it waits in for one of the IN_FLIGHT turns (`timeout` counts from
        the send); None for a request that must not wait behind a backlog of writes (a Lease, an access review)."""
        headers = {"Accept": "application/json", **(await self._auth())}
        content = None
        if body is not None:
            headers["Content-Type"] = content_type
            content = json.dumps(body).encode()
        async with self._turns.turn(flow) if flow is not None else contextlib.nullcontext():
            try:
                response = await self.http.request(
                    method,
                    self._url(path),
                    params=self._params(query),
                    content=content,
                    headers=headers,
                    timeout=timeout,
                    extensions=self._extensions,
                )
            except httpx.HTTPError as exc:
                raise unreachable(exc) from None
        if not 200 <= response.status_code < 300:
            raise _error(response)
        result: JSON = response.json() if response.content else {}
        return result

    async def whoami(self) -> str | None:
        """The username the API server authenticates this client as (a SelfSubjectReview, which every authenticated
        user may make); None when the server does not say."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            answer = await self.request(
                "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review, flow=None
            )
        except KubeError as exc:
            log.warning("the API server did not say who kflare is: %s", exc.message)
            return None
        name = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
        return str(name) if name else None

    async def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON:
        return await self.request("GET", rt.path(namespace, name), flow=_flow(rt))

    async def list(self, rt: ResourceType, namespace: str | None = None, **query: str | int | bool) -> JSON:
        return await self.request("GET", rt.path(namespace), query=query)

    async def create(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        metrics.KUBERNETES_WRITES.labels(rt.plural, "", "create").inc()
        path = rt.path(namespace)
        return await self.request("POST", path, body=body, query=MANAGED, flow=_flow(rt))

    async def replace(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        metrics.KUBERNETES_WRITES.labels(rt.plural, "", "update").inc()
        path = rt.path(namespace, body["metadata"]["name"])
        return await self.request("PUT", path, body=body, query=MANAGED, flow=_flow(rt))

    async def patch(
        self,
        rt: ResourceType,
        name: str,
        patch: object,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
    ) -> JSON:
        path = rt.path(namespace, name, subresource)
        metrics.KUBERNETES_WRITES.labels(rt.plural, subresource or "", "patch").inc()
        return await self.request("PATCH", path, body=patch, content_type=content_type, query=MANAGED, flow=_flow(rt))

    async def apply(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        """Server-side apply of `body` (JSON is YAML) as kflare's field manager, taking over fields another manager
        set: the object is kflare's, and what kflare leaves out of `body` is not touched. Applying what the object
        already holds writes nothing."""
        metrics.KUBERNETES_WRITES.labels(rt.plural, "", "apply").inc()
        path = rt.path(namespace, body["metadata"]["name"])
        query: dict[str, str | int | bool] = {**MANAGED, "force": True}
        return await self.request("PATCH", path, body=body, content_type=APPLY_PATCH, query=query, flow=_flow(rt))

    async def delete(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON:
        metrics.KUBERNETES_WRITES.labels(rt.plural, "", "delete").inc()
        return await self.request("DELETE", rt.path(namespace, name), flow=_flow(rt))

    async def watch(
        self,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        resource_version: str,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[JSON]:
        """Events of one watch request, bookmarks included, until the server ends it."""
        query: dict[str, str | int | bool] = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        if field_selector:
            query["fieldSelector"] = field_selector
        headers = {"Accept": "application/json", **(await self._auth())}
        # A read that stays silent well past any bookmark interval means the connection died without a word.
        timeout = httpx.Timeout(REQUEST_TIMEOUT, read=90.0)
        request = self.watches.build_request(
            "GET",
            self._url(rt.path(namespace)),
            params=self._params(query),
            headers=headers,
            timeout=timeout,
            extensions=self._extensions,
        )
        try:
            response = await self.watches.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise unreachable(exc) from None
        try:
            if response.status_code != 200:
                await response.aread()
                raise _error(response)
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        event: JSON = json.loads(line)
                        yield event
        except httpx.HTTPError as exc:
            raise unreachable(exc) from None
        finally:
            await response.aclose()
