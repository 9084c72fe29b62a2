"""Traffic as it really arrives: through cloudflared (the stand-in of tests/fixtures/cloudflared.py), which picks
the ingress rule kflare wrote, dials its origin and adds the edge's headers."""

from __future__ import annotations

import json
from typing import Any

import httpx

from reconcilers.gateway.translate import Translation
from tests.dataplane.world import NS, backend, endpoint_slice, gateway, http_route, service, world
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


async def test_the_backend_sees_the_edges_scheme_and_visitor_and_no_envoy_control_header(dataplane: DataPlane) -> None:
    w = world([http_route("app", ["app.example.com"], [{"backendRefs": [backend("alpha")]}])], _ports(dataplane))
    edge = await dataplane.through_cloudflared(w)

    async def served() -> dict[str, str] | None:
        reply = await edge.get(
            "app.example.com", headers={"x-envoy-upstream-rq-timeout-ms": "1", "x-envoy-retry-on": "5xx"}
        )
        return reply.json()["headers"] if reply.status_code == 200 else None

    headers = await eventually(served, what="the route to be served")
    assert headers["x-forwarded-proto"] == "https"  # not Envoy's own plaintext hop from loopback
    assert headers["cf-connecting-ip"] == VISITOR
    assert headers["x-forwarded-for"].split(",")[0].strip() == VISITOR
    assert headers["cf-ray"]
    assert not [name for name in headers if name.startswith("x-envoy-")]


async def test_a_redirect_without_a_scheme_keeps_the_visitors_https(dataplane: DataPlane) -> None:
    rules = [{"filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "new.example.com"}}]}]
    edge = await dataplane.through_cloudflared(world([http_route("moved", ["old.example.com"], rules)], {}))

    async def redirected() -> str | None:
        reply = await edge.get("old.example.com", "/page")
        return reply.headers.get("location") if reply.status_code == 302 else None

    assert await eventually(redirected, what="the redirect") == "https://new.example.com/page"


async def test_http_and_https_listeners_are_told_apart_by_the_edges_scheme(dataplane: DataPlane) -> None:
    """The usual pair: an HTTP listener whose route redirects to HTTPS, and an HTTPS listener with the real route,
    for the same hostname. The visitor's scheme picks the listener."""
    listeners = [
        {"name": "http", "protocol": "HTTP", "port": 80},
        {"name": "https", "protocol": "HTTPS", "port": 443},
    ]
    redirect = {"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]}
    to_http = [{"name": "edge", "namespace": NS, "sectionName": "http"}]
    to_https = [{"name": "edge", "namespace": NS, "sectionName": "https"}]
    w = world(
        [
            http_route("to-https", ["shop.example.com"], [redirect], parents=to_http),
            http_route("shop", ["shop.example.com"], [{"backendRefs": [backend("alpha")]}], parents=to_https),
        ],
        _ports(dataplane),
        gateways=[gateway(listeners=listeners)],
    )
    result = await dataplane.apply(w)
    assert all(c["status"] == "True" for p in result.route_parents.values() for c in p[0]["conditions"])
    edge = dataplane.cloudflared(result)

    async def served() -> bool:
        reply = await edge.get("shop.example.com", "/cart")
        return reply.status_code == 200 and reply.json()["backend"] == "alpha"

    await eventually(served, what="HTTPS visitors to reach the shop")
    plain = await edge.get("shop.example.com", "/cart", scheme="http")
    assert plain.status_code == 301
    assert plain.headers["location"] == "https://shop.example.com/cart"


def _ports(plane: DataPlane) -> dict[str, int]:
    return {"alpha": plane.backend_ports["alpha"]}


async def test_a_hostname_a_narrower_listener_owns_is_never_answered_by_a_wider_listeners_routes(
    dataplane: DataPlane,
) -> None:
    """GatewayHTTPListenerIsolation: each listener's route answers its own path only, and a request for a host
    of a narrower listener never falls through to a wider one's route (404, not 200 from the wrong route)."""
    names = {"empty": None, "wild": "*.example.com", "wild-foo": "*.foo.example.com", "abc": "abc.foo.example.com"}
    listeners = [
        {"name": name, "protocol": "HTTP", "port": 80, **({"hostname": host} if host else {})}
        for name, host in names.items()
    ]
    # A narrower listener with no route at all still owns its hostname.
    listeners.append({"name": "quiet", "protocol": "HTTP", "port": 80, "hostname": "quiet.example.com"})
    routes = [
        http_route(
            f"to-{name}",
            None,
            [{"matches": [{"path": {"type": "PathPrefix", "value": f"/{name}"}}], "backendRefs": [backend("alpha")]}],
            parents=[{"name": "edge", "namespace": NS, "sectionName": name}],
        )
        for name in names
    ]
    # Listeners with hostnames publish them through the tunnel via their routes' hostnames; a stand-in document
    # with a catch-all to the data plane sends every host there, as a wildcard DNS record and rule would.
    result = await dataplane.apply(world(routes, _ports(dataplane), gateways=[gateway(listeners=listeners)]))
    edge = dataplane.cloudflared(result)
    edge.document = {"ingress": [{"service": dataplane.url}]}
    expected: dict[str, str | None] = {
        "bar.com": "empty",
        "bar.example.com": "wild",
        "bar.foo.example.com": "wild-foo",
        "abc.foo.example.com": "abc",
        "quiet.example.com": None,
    }

    async def served() -> bool:
        return (await edge.get("abc.foo.example.com", "/abc")).status_code == 200

    await eventually(served, what="the routes to be served")
    for host, owner in expected.items():
        for name in names:
            reply = await edge.get(host, f"/{name}")
            assert reply.status_code == (200 if name == owner else 404), (host, name)


async def test_the_host_header_keeps_its_port_on_the_way_to_the_backend(dataplane: DataPlane) -> None:
    w = world([http_route("app", ["app.example.com"], [{"backendRefs": [backend("alpha")]}])], _ports(dataplane))
    edge = await dataplane.through_cloudflared(w)

    async def served() -> dict[str, str] | None:
        reply = await edge.get("app.example.com:8443")
        return reply.json()["headers"] if reply.status_code == 200 else None

    assert (await eventually(served, what="the route to be served"))["host"] == "app.example.com:8443"


async def test_cors_preflights_are_answered_and_allowed_origins_told(dataplane: DataPlane) -> None:
    cors = {
        "allowOrigins": ["https://app.example.com", "https://*.tools.example.com"],
        "allowMethods": ["GET", "POST"],
        "allowHeaders": ["x-token"],
        "exposeHeaders": ["x-served"],
        "allowCredentials": True,
        "maxAge": 600,
    }
    rules = [{"filters": [{"type": "CORS", "cors": cors}], "backendRefs": [backend("alpha")]}]
    edge = await dataplane.through_cloudflared(
        world([http_route("api", ["api.example.com"], rules)], _ports(dataplane))
    )
    preflight = {"Origin": "https://ci.tools.example.com", "Access-Control-Request-Method": "POST"}

    async def answered() -> httpx.Response | None:
        reply = await edge.request("OPTIONS", "api.example.com", "/items", headers=preflight)
        return reply if "access-control-allow-origin" in reply.headers else None

    reply = await eventually(answered, what="the preflight to be answered")
    assert reply.headers["access-control-allow-origin"] == "https://ci.tools.example.com"
    assert reply.headers["access-control-allow-methods"] == "GET,POST"
    assert reply.headers["access-control-allow-headers"] == "x-token"
    assert reply.headers["access-control-allow-credentials"] == "true"
    assert reply.headers["access-control-max-age"] == "600"
    simple = await edge.get("api.example.com", "/items", headers={"Origin": "https://app.example.com"})
    assert simple.status_code == 200
    assert simple.headers["access-control-allow-origin"] == "https://app.example.com"
    assert simple.headers["access-control-expose-headers"] == "x-served"
    other = await edge.get("api.example.com", "/items", headers={"Origin": "https://evil.example.org"})
    assert "access-control-allow-origin" not in other.headers
    # A preflight from an origin not allowed is answered at the gateway, allowing nothing: the backend (which
    # echoes what it was sent) never sees it.
    refused = await edge.request(
        "OPTIONS", "api.example.com", "/items", headers={**preflight, "Origin": "https://evil.example.org"}
    )
    assert refused.status_code in (200, 204, 403), refused.text
    assert "access-control-allow-origin" not in refused.headers
    assert "backend" not in refused.text, "the preflight reached the backend"


async def test_each_backend_gets_its_own_header_changes(dataplane: DataPlane) -> None:
    def changes(name: str) -> list[dict[str, Any]]:
        return [
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-picked", "value": name}]}},
            {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "x-via", "value": name}]}},
        ]

    rules = [
        {
            "backendRefs": [
                {**backend("alpha", weight=1), "filters": changes("alpha")},
                {**backend("beta", weight=1), "filters": changes("beta")},
            ]
        }
    ]
    ports = {name: dataplane.backend_ports[name] for name in ("alpha", "beta")}
    edge = await dataplane.through_cloudflared(world([http_route("split", ["split.example.com"], rules)], ports))

    async def both() -> set[str] | None:
        seen = set()
        for _ in range(30):
            reply = await edge.get("split.example.com")
            if reply.status_code != 200:
                return None
            served = reply.json()
            assert served["headers"]["x-picked"] == served["backend"] == reply.headers["x-via"]
            seen.add(served["backend"])
        return seen if len(seen) == 2 else None

    assert await eventually(both, what="both backends, each with its headers") == {"alpha", "beta"}


async def test_a_retry_gets_past_the_failures_it_names(dataplane: DataPlane) -> None:
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/retried"}}],
            "retry": {"codes": [503], "attempts": 2, "backoff": "10ms"},
            "backendRefs": [backend("gamma")],
        },
        {"backendRefs": [backend("gamma")]},
    ]
    w = world([http_route("flaky", ["flaky.example.com"], rules)], {"gamma": dataplane.backend_ports["gamma"]})
    edge = await dataplane.through_cloudflared(w)

    async def served() -> bool:
        return (await edge.get("flaky.example.com", "/retried")).status_code == 200

    await eventually(served, what="the route to be served")
    assert (await edge.get("flaky.example.com", "/retried?fail=2&key=a")).status_code == 200  # two retries
    assert (await edge.get("flaky.example.com", "/retried?fail=3&key=b")).status_code == 503  # one too many
    assert (await edge.get("flaky.example.com", "/plain?fail=1&key=c")).status_code == 503  # no retry asked


async def test_an_external_name_service_is_reached_by_its_name(dataplane: DataPlane) -> None:
    external = {
        "kind": "Service",
        "metadata": {"name": "elsewhere", "namespace": NS},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    }
    port = dataplane.backend_ports["beta"]
    rules = [{"backendRefs": [backend("elsewhere", port=port)]}]
    # ExternalName Services are refused unless allowed: for the shared plane, as --gateway-allow-external-name-services
    # (the chart's gateway.allowExternalNameServices) says.
    w = world(
        [http_route("ext", ["ext.example.com"], rules)], {}, services=[external], allow_external_name_services=True
    )
    result = await dataplane.apply(w)
    assert parent_conditions(result, "ext")["ResolvedRefs"]["status"] == "True"
    edge = dataplane.cloudflared(result)

    async def served() -> str | None:
        reply = await edge.get("ext.example.com", "/far")
        return reply.json()["backend"] if reply.status_code == 200 else None

    assert await eventually(served, what="the ExternalName Service to answer") == "beta"

    # Not allowed (the default), the backend is refused and its requests answered 500, never sent to the name.
    result = await dataplane.apply(world([http_route("ext", ["ext.example.com"], rules)], {}, services=[external]))
    assert parent_conditions(result, "ext")["ResolvedRefs"]["reason"] == "InvalidKind"

    async def refused() -> bool:
        return (await edge.get("ext.example.com", "/far")).status_code == 500

    await eventually(refused, what="the ExternalName Service's requests to be answered 500")


def parent_conditions(result: Translation, name: str) -> dict[str, dict[str, Any]]:
    (entry,) = result.route_parents[("HTTPRoute", NS, name)]
    return {c["type"]: dict(c) for c in entry["conditions"]}
