"""Traffic as it really arrives: through cloudflared (the stand-in of tests/fixtures/cloudflared.py), which picks
the ingress rule kflare wrote, dials its origin and adds the edge's headers."""

from __future__ import annotations

import json

from tests.dataplane.world import backend, endpoint_slice, http_route, service, world
from tests.fixtures.cloudflared import VISITOR
from tests.fixtures.envoy import DataPlane
from tests.helpers import eventually


async def test_a_websocket_reaches_its_backend_and_echoes(dataplane: DataPlane) -> None:
    port = dataplane.backend_ports["alpha"]
    w = world(
        [
            http_route("live", ["live.example.com"], [{"backendRefs": [backend("alpha")]}]),
            # HTTPRouteBackendProtocolWebSocket: a Service port that says it speaks WebSocket.
            http_route("ws", ["ws.example.com"], [{"backendRefs": [backend("ws-svc")]}]),
        ],
        {"alpha": port},
        services=[service("ws-svc", app_protocol="kubernetes.io/ws")],
        slices=[endpoint_slice("ws-svc", port)],
    )
    edge = await dataplane.through_cloudflared(w)

    async def served() -> bool:
        return (await edge.get("ws.example.com")).status_code == 200

    await eventually(served, what="the routes to be served")
    for host in ("live.example.com", "ws.example.com"):
        async with edge.websocket(host, "/api/live/ws") as socket:
            hello = json.loads(await socket.recv(decode=True))
            assert hello["backend"] == "alpha"
            assert hello["path"] == "/api/live/ws"
            assert hello["headers"]["host"] == host
            assert hello["headers"]["cf-connecting-ip"] == VISITOR
            await socket.send("ping")
            assert await socket.recv(decode=True) == "ping"

