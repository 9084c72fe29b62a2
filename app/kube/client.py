"""A thin JSON client of the Kubernetes API on top of kubernetes_asyncio's connection handling.

kubernetes_asyncio's generated methods turn every reply into model objects; the controller keeps plain dicts instead
(cheaper to parse and to hold in the cache), so it calls the API by path and parses JSON itself. kubernetes_asyncio
still does what it does well: kubeconfig and in-cluster configuration, TLS, token refresh.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.api_client import ApiClient

log = logging.getLogger(__name__)

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
REQUEST_TIMEOUT = 30.0


@dataclass(frozen=True)
class ResourceType:
    """Where a kind lives in the API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

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


async def _error(response: aiohttp.ClientResponse) -> KubeError:
    raw = await response.read()
    try:
        status = json.loads(raw)
        return KubeError(response.status, str(status.get("reason", "")), str(status.get("message", "")))
    except (ValueError, AttributeError):
        return KubeError(response.status, response.reason or "", raw[:500].decode(errors="replace"))


class KubeClient:
    """JSON requests by path. One per process; safe to share between tasks."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    @classmethod
    async def connect(cls, kubeconfig: Path | None = None) -> KubeClient:
        configuration = client.Configuration()
        if kubeconfig is None:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException:
                await config.load_kube_config(client_configuration=configuration)
        else:
            await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        return cls(ApiClient(configuration))

    async def close(self) -> None:
        await self.api.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout = REQUEST_TIMEOUT,
    ) -> aiohttp.ClientResponse:
        params = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (query or {}).items()]
        response: aiohttp.ClientResponse = await self.api.call_api(
            path,
            method,
            query_params=params,
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = REQUEST_TIMEOUT,
    ) -> JSON:
        response = await self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        async with response:
            if not 200 <= response.status < 300:
                raise await _error(response)
            raw = await response.read()
        result: JSON = json.loads(raw) if raw else {}
        return result

    async def get(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON:
        return await self.request("GET", rt.path(namespace, name))

    async def list(self, rt: ResourceType, namespace: str | None = None, **query: str | int | bool) -> JSON:
        return await self.request("GET", rt.path(namespace), query=query)

    async def create(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        return await self.request("POST", rt.path(namespace), body=body)

    async def replace(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        return await self.request("PUT", rt.path(namespace, body["metadata"]["name"]), body=body)

    async def patch(
        self,
        rt: ResourceType,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        content_type: str = MERGE_PATCH,
    ) -> JSON:
        return await self.request("PATCH", rt.path(namespace, name, subresource), body=patch, content_type=content_type)

    async def delete(self, rt: ResourceType, name: str, namespace: str | None = None) -> JSON:
        return await self.request("DELETE", rt.path(namespace, name))

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
        # The server closes the watch after timeout_seconds; a read that stays silent well past any bookmark
        # interval means the connection died without a word.
        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 30, sock_connect=REQUEST_TIMEOUT, sock_read=90)
        response = await self._send("GET", rt.path(namespace), query=query, timeout=timeout)
        async with response:
            if response.status != 200:
                raise await _error(response)
            # Split lines ourselves: aiohttp's readline refuses lines longer than 64 KiB, and a Secret is up to 1 MiB.
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        event: JSON = json.loads(line)
                        yield event
