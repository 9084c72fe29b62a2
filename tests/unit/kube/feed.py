"""A Kubernetes API for unit tests of the controller runtime: LIST answers what the test put there, each WATCH
plays the events the test pushes, in order, as the API server's watch would."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from app.kube.client import JSON, ResourceType
from app.kube.informer import Informer


def obj(name: str, rv: int, *, generation: int = 1, namespace: str = "ns", **meta: Any) -> JSON:
    status = meta.pop("status", {})
    metadata = {"name": name, "namespace": namespace, "resourceVersion": str(rv), "generation": generation}
    return {"metadata": {**metadata, **meta}, "status": status}


class FeedKube:
    def __init__(self) -> None:
        self.items: dict[str, list[JSON]] = {}
        self.feeds: dict[tuple[str, str], asyncio.Queue[JSON]] = {}

    def put(self, rt: ResourceType, *objects: JSON) -> None:
        self.items.setdefault(rt.plural, []).extend(objects)

    def push(self, rt: ResourceType, kind: str, item: JSON, field_selector: str = "") -> None:
        """The next event of the watches of `rt` (those with `field_selector`, if given)."""
        feed = self.feeds.setdefault((rt.plural, field_selector), asyncio.Queue())
        feed.put_nowait({"type": kind, "object": copy.deepcopy(item)})

    async def list(self, rt: ResourceType, namespace: str | None = None, **query: Any) -> JSON:
        items = copy.deepcopy(self.items.get(rt.plural, []))
        selector = str(query.get("fieldSelector") or "")
        if selector.startswith("metadata.name="):
            items = [i for i in items if i["metadata"]["name"] == selector.removeprefix("metadata.name=")]
        if namespace:
            items = [i for i in items if i["metadata"].get("namespace") == namespace]
        rv = max((int(i["metadata"]["resourceVersion"]) for i in items), default=1)
        return {"items": items, "metadata": {"resourceVersion": str(rv)}}

    async def watch(self, rt: ResourceType, *, field_selector: str | None = None, **kwargs: Any) -> AsyncIterator[JSON]:
        feed = self.feeds.setdefault((rt.plural, field_selector or ""), asyncio.Queue())
        while True:
            yield await feed.get()

    async def create(self, rt: ResourceType, body: JSON, namespace: str | None = None) -> JSON:
        return body  # Events


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Let the loop run until `check()` holds; fail after a deadline."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


async def seen(informer: Informer, rv: int) -> None:
    """Wait until the informer has handled every event up to resourceVersion `rv`."""
    await until(lambda: informer.resource_version == str(rv), f"the informer to reach version {rv}")
