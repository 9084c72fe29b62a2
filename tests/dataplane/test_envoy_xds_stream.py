"""A real Envoy on its delta ADS stream: a wrong token gets it nothing; a standby's refusal (or a leader that stops
leading) leaves it serving what it has, and it takes the next leader's configuration when that one serves."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from app.controlplane import free_port
from app.xds import XdsServer
from reconcilers.gateway import envoy
from reconcilers.gateway.snapshot import SnapshotStore
from tests.fixtures.envoy import TOKEN, _Thread, running_envoy
from tests.helpers import eventually


@dataclass
class Leader:
    """Whether the xDS listener may serve, as the manager's leadership says it (flipped by the test)."""

    leading: bool = True
    store: SnapshotStore = field(default_factory=SnapshotStore)

    def __post_init__(self) -> None:
        self.store.serving = lambda: self.leading


def answering(ingress: int, body: str) -> dict[str, list[dict[str, object]]]:
    route = {"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"inline_string": body}}}
    return {
        "listeners": [envoy.ingress_listener("127.0.0.1", ingress)],
        "routes": [
            {
                "@type": envoy.ROUTE_CONFIGURATION,
                "name": envoy.INGRESS,
                "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [route]}],
            }
        ],
    }


@pytest.fixture
def xds() -> Iterator[tuple[Leader, int]]:
    leader = Leader()
    port = free_port()
    thread = _Thread()
    thread.start(XdsServer(leader.store, lambda: TOKEN, "127.0.0.1", port), port)
    try:
        yield leader, port
    finally:
        thread.stop()


@contextlib.contextmanager
def data_plane(xds_port: int, token: str = TOKEN, *, wait_ready: bool = True) -> Iterator[int]:
    """Envoy on the listener; yields its admin port."""
    admin = free_port()
    bootstrap = envoy.bootstrap(
        node_id="stream", xds_host="127.0.0.1", xds_port=xds_port, token=token, admin_port=admin
    )
    with running_envoy(bootstrap, wait_ready=wait_ready):
        yield admin


async def body(port: int) -> str | None:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            reply = await http.get(f"http://127.0.0.1:{port}/")
    except httpx.TransportError:
        return None
    return reply.text if reply.status_code == 200 else None


async def stat(admin: int, name: str) -> int | None:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            text = (await http.get(f"http://127.0.0.1:{admin}/stats?filter={re.escape(name)}")).text
    except httpx.TransportError:  # its admin not listening yet
        return None
    found = re.search(rf"^{re.escape(name)}: (\d+)$", text, re.MULTILINE)
    return int(found.group(1)) if found else None


async def test_a_route_change_is_pushed_to_envoy(xds: tuple[Leader, int]) -> None:
    leader, port = xds
    ingress = free_port()
    leader.store.publish(answering(ingress, "first"))
    with data_plane(port) as admin:
        assert await body(ingress) == "first"
        leader.store.publish(answering(ingress, "second"))

        async def second() -> bool:
            return await body(ingress) == "second"

        await eventually(second, what="Envoy to serve the pushed route")
        # One stream, held open: the change came down it, no reconnect and no poll.
        assert await stat(admin, "cluster.kflare-xds.upstream_rq_total") == 1


async def test_envoy_with_a_wrong_token_gets_nothing(xds: tuple[Leader, int]) -> None:
    leader, port = xds
    ingress = free_port()
    leader.store.publish(answering(ingress, "secret"))
    with data_plane(port, token="not-the-token", wait_ready=False) as admin:

        async def refused() -> bool:
            # Each stream ends at once with UNAUTHENTICATED, and Envoy opens another after a back-off.
            count = await stat(admin, "cluster.kflare-xds.upstream_rq_completed")
            return count is not None and count >= 2

        await eventually(refused, what="Envoy's streams to be refused")
        # Nothing came down any of them. (Whether a stream is open at this instant is a race with Envoy's next
        # attempt, so `control_plane.connected_state` says nothing.)
        for accepted in ("cluster_manager.cds.update_success", "listener_manager.lds.update_success"):
            assert await stat(admin, accepted) == 0, accepted
        assert await body(ingress) is None


async def test_a_standby_refuses_and_envoy_keeps_serving_until_a_leader_serves(xds: tuple[Leader, int]) -> None:
    leader, port = xds
    ingress = free_port()
    leader.store.publish(answering(ingress, "before"))
    with data_plane(port) as admin:
        assert await body(ingress) == "before"
        # Leadership lost: the stream ends with UNAVAILABLE, and every new one too while this replica stands by.
        leader.leading = False
        leader.store.clear()

        async def disconnected() -> bool:
            return await stat(admin, "control_plane.connected_state") == 0

        await eventually(disconnected, what="the stream to end")

        async def retried() -> bool:
            count = await stat(admin, "cluster.kflare-xds.upstream_rq_completed")
            return count is not None and count >= 2

        await eventually(retried, what="Envoy to try again and be refused")
        assert await body(ingress) == "before", "Envoy keeps the configuration it has"

        leader.store.publish(answering(ingress, "after"))
        leader.leading = True

        async def after() -> bool:
            return await body(ingress) == "after"

        await eventually(after, what="Envoy to take the new leader's configuration")
