"""Requests through Envoy on loopback, configured by kflare's xDS from a translation, sent with the Host header as
cloudflared sends them."""

from __future__ import annotations

from typing import Any

import httpx

from reconcilers.gateway.translate import World, translate
from tests.dataplane.world import backend, http_route, world
from tests.fixtures.envoy import DataPlane
from tests.helpers import eventually


async def apply(plane: DataPlane, w: World) -> None:
    await plane.apply(w)


async def get(plane: DataPlane, host: str, path: str = "/", **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=plane.url, timeout=10) as client:
        return await client.request(
            kwargs.pop("method", "GET"), path, headers={"Host": host, **kwargs.pop("headers", {})}, **kwargs
        )


async def served_by(plane: DataPlane, host: str, path: str = "/", **kwargs: Any) -> str | None:
    reply = await get(plane, host, path, **kwargs)
    return reply.json()["backend"] if reply.status_code == 200 else None


async def test_exact_and_wildcard_hostnames_and_404_for_others(dataplane: DataPlane) -> None:
    await apply(
        dataplane,
        world(
            [
                http_route("exact", ["app.example.com"], [{"backendRefs": [backend("alpha")]}]),
                http_route("wild", ["*.example.com"], [{"backendRefs": [backend("beta")]}]),
            ],
            {"alpha": dataplane.backend_ports["alpha"], "beta": dataplane.backend_ports["beta"]},
        ),
    )

    async def routed() -> bool:
        return await served_by(dataplane, "app.example.com") == "alpha"

    await eventually(routed, what="app.example.com to reach alpha")
    assert await served_by(dataplane, "other.example.com") == "beta"
    assert await served_by(dataplane, "deep.other.example.com") == "beta"
    assert (await get(dataplane, "example.com")).status_code == 404
    assert (await get(dataplane, "app.example.org")).status_code == 404


def ports(plane: DataPlane, *names: str) -> dict[str, int]:
    return {name: plane.backend_ports[name] for name in names or tuple(plane.backend_ports)}


async def test_path_matches_exact_prefix_and_regex(dataplane: DataPlane) -> None:
    rules = [
        {"matches": [{"path": {"type": "Exact", "value": "/exact"}}], "backendRefs": [backend("alpha")]},
        {"matches": [{"path": {"type": "PathPrefix", "value": "/api/"}}], "backendRefs": [backend("beta")]},
        {
            "matches": [{"path": {"type": "RegularExpression", "value": "/v[0-9]+/items"}}],
            "backendRefs": [backend("gamma")],
        },
    ]
    await apply(dataplane, world([http_route("paths", ["paths.example.com"], rules)], ports(dataplane)))
    host = "paths.example.com"

    async def routed() -> bool:
        return await served_by(dataplane, host, "/exact") == "alpha"

    await eventually(routed, what="the path routes")
    assert await served_by(dataplane, host, "/exact/more") is None  # Exact is exact
    assert await served_by(dataplane, host, "/api") == "beta"  # the trailing slash of a prefix is ignored
    assert await served_by(dataplane, host, "/api/users") == "beta"
    assert await served_by(dataplane, host, "/apiary") is None  # a prefix matches whole path elements
    assert await served_by(dataplane, host, "/v2/items") == "gamma"
    assert await served_by(dataplane, host, "/v2/items/x") is None  # the regex matches the whole path


async def test_header_query_and_method_matches(dataplane: DataPlane) -> None:
    rules = [
        {"matches": [{"headers": [{"name": "x-tier", "value": "gold"}]}], "backendRefs": [backend("alpha")]},
        {"matches": [{"queryParams": [{"name": "beta", "value": "yes"}]}], "backendRefs": [backend("beta")]},
        {"matches": [{"method": "DELETE"}], "backendRefs": [backend("gamma")]},
        {
            "matches": [{"headers": [{"type": "RegularExpression", "name": "x-user", "value": "adm.*"}]}],
            "backendRefs": [backend("mirror")],
        },
    ]
    await apply(dataplane, world([http_route("m", ["match.example.com"], rules)], ports(dataplane)))
    host = "match.example.com"

    async def routed() -> bool:
        return await served_by(dataplane, host, headers={"x-tier": "gold"}) == "alpha"

    await eventually(routed, what="the header route")
    assert await served_by(dataplane, host, headers={"x-tier": "silver"}) is None
    assert await served_by(dataplane, host, "/?beta=yes") == "beta"
    assert await served_by(dataplane, host, "/?beta=no") is None
    assert await served_by(dataplane, host, method="DELETE") == "gamma"
    assert await served_by(dataplane, host, headers={"x-user": "admin"}) == "mirror"
    assert await served_by(dataplane, host, headers={"x-user": "root"}) is None


async def test_header_modifiers_never_expand_envoy_operators(dataplane: DataPlane) -> None:
    rules = [
        {
            "filters": [
                {
                    "type": "RequestHeaderModifier",
                    "requestHeaderModifier": {
                        "set": [{"name": "x-set", "value": "%ENVIRONMENT(HOME)%"}],
                        "add": [{"name": "x-added", "value": "100%"}],
                        "remove": ["x-secret"],
                    },
                },
                {
                    "type": "ResponseHeaderModifier",
                    "responseHeaderModifier": {"set": [{"name": "x-served-by", "value": "%UPSTREAM_HOST%"}]},
                },
            ],
            "backendRefs": [backend("alpha")],
        }
    ]
    await apply(dataplane, world([http_route("h", ["headers.example.com"], rules)], ports(dataplane)))

    async def modified() -> httpx.Response | None:
        reply = await get(dataplane, "headers.example.com", headers={"x-secret": "s", "x-set": "client"})
        return reply if reply.status_code == 200 else None

    reply = await eventually(modified, what="the header route")
    seen = reply.json()["headers"]
    assert seen["x-set"] == "%ENVIRONMENT(HOME)%"
    assert seen["x-added"] == "100%"
    assert "x-secret" not in seen
    assert reply.headers["x-served-by"] == "%UPSTREAM_HOST%"
    assert not [name for name in seen if name.startswith("x-envoy")]


async def test_redirect(dataplane: DataPlane) -> None:
    rules = [
        {
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {"scheme": "https", "hostname": "new.example.com", "statusCode": 301},
                }
            ]
        }
    ]
    await apply(dataplane, world([http_route("r", ["old.example.com"], rules)], ports(dataplane)))

    async def redirected() -> httpx.Response | None:
        reply = await get(dataplane, "old.example.com", "/page?q=1")
        return reply if reply.status_code == 301 else None

    reply = await eventually(redirected, what="the redirect")
    assert reply.headers["location"] == "https://new.example.com/page?q=1"


async def test_redirect_replacing_the_prefix(dataplane: DataPlane) -> None:
    def redirect(prefix: str) -> dict[str, Any]:
        return {
            "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {
                        "path": {
                            "type": "ReplacePrefixMatch",
                            "replacePrefixMatch": "/" if prefix == "/gone" else "/v2",
                        }
                    },
                }
            ],
        }

    await apply(
        dataplane,
        world([http_route("rp", ["moved.example.com"], [redirect("/gone"), redirect("/v1")])], ports(dataplane)),
    )

    async def redirected() -> httpx.Response | None:
        reply = await get(dataplane, "moved.example.com", "/v1/items")
        return reply if reply.status_code == 302 else None

    reply = await eventually(redirected, what="the prefix redirect")
    assert reply.headers["location"].endswith("moved.example.com/v2/items")
    assert (
        (await get(dataplane, "moved.example.com", "/gone/page")).headers["location"].endswith("moved.example.com/page")
    )


async def test_url_rewrites(dataplane: DataPlane) -> None:
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {
                        "hostname": "internal.example.com",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"},
                    },
                }
            ],
            "backendRefs": [backend("alpha")],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/strip"}}],
            "filters": [
                {
                    "type": "URLRewrite",
                    "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
                }
            ],
            "backendRefs": [backend("alpha")],
        },
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/full"}}],
            "filters": [
                {"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/one"}}}
            ],
            "backendRefs": [backend("alpha")],
        },
    ]
    await apply(dataplane, world([http_route("rw", ["rewrite.example.com"], rules)], ports(dataplane)))
    host = "rewrite.example.com"

    async def rewritten() -> dict[str, Any] | None:
        reply = await get(dataplane, host, "/old/page")
        return reply.json() if reply.status_code == 200 else None

    seen = await eventually(rewritten, what="the rewrite route")
    assert seen["path"] == "/new/page"
    assert seen["headers"]["host"] == "internal.example.com"
    assert (await get(dataplane, host, "/strip/x/y")).json()["path"] == "/x/y"
    assert (await get(dataplane, host, "/strip")).json()["path"] == "/"
    assert (await get(dataplane, host, "/full/a/b")).json()["path"] == "/one"


async def test_weighted_backends(dataplane: DataPlane) -> None:
    rules = [{"backendRefs": [backend("alpha", weight=3), backend("beta", weight=1), backend("gamma", weight=0)]}]
    await apply(dataplane, world([http_route("w", ["weights.example.com"], rules)], ports(dataplane)))

    async def routed() -> bool:
        return await served_by(dataplane, "weights.example.com") is not None

    await eventually(routed, what="the weighted route")

    async def warm() -> bool:
        return dataplane.warm()

    await eventually(warm, what="every backend's endpoints in Envoy")
    counts = {"alpha": 0, "beta": 0, "gamma": 0}
    async with httpx.AsyncClient(base_url=dataplane.url, timeout=10) as client:
        for _ in range(200):
            reply = await client.get("/", headers={"Host": "weights.example.com"})
            counts[reply.json()["backend"]] += 1
    assert counts["gamma"] == 0
    assert counts["beta"] > 0
    assert counts["alpha"] > counts["beta"]


async def test_request_mirror(dataplane: DataPlane) -> None:
    rules = [
        {
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": backend("mirror")}}],
            "backendRefs": [backend("alpha")],
        }
    ]
    await apply(dataplane, world([http_route("mi", ["mirror.example.com"], rules)], ports(dataplane)))

    async def routed() -> bool:
        return await served_by(dataplane, "mirror.example.com", "/mirrored-path") == "alpha"

    await eventually(routed, what="the mirrored route")

    async def mirrored() -> bool:
        # The mirror's endpoints may reach Envoy after the primary's: a mirrored request is dropped until then.
        await served_by(dataplane, "mirror.example.com", "/mirrored-path")
        return any(seen["path"] == "/mirrored-path" for seen in dataplane.seen["mirror"])

    await eventually(mirrored, what="the mirror backend to see the request")


async def test_route_timeouts_are_the_routes_and_client_envoy_headers_are_ignored(dataplane: DataPlane) -> None:
    rules = [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/short"}}],
            "timeouts": {"request": "300ms"},
            "backendRefs": [backend("alpha")],
        },
        {"backendRefs": [backend("alpha")]},
    ]
    await apply(dataplane, world([http_route("t", ["timeouts.example.com"], rules)], ports(dataplane)))
    host = "timeouts.example.com"

    async def routed() -> bool:
        return (await get(dataplane, host, "/short")).status_code == 200

    await eventually(routed, what="the timeout route")
    assert (await get(dataplane, host, "/short?delay_ms=1500")).status_code == 504
    # No route timeout: the backend's answer arrives, whatever a client asks of Envoy.
    reply = await get(
        dataplane,
        host,
        "/slow?delay_ms=800",
        headers={"x-envoy-upstream-rq-timeout-ms": "50", "x-envoy-max-retries": "3"},
    )
    assert reply.status_code == 200
    assert "x-envoy-expected-rq-timeout-ms" not in reply.json()["headers"]
    assert "x-envoy-upstream-rq-timeout-ms" not in reply.json()["headers"]


async def test_route_change_applies_without_dropping_a_request_in_flight(dataplane: DataPlane) -> None:
    host = "change.example.com"
    first = world([http_route("c", [host], [{"backendRefs": [backend("alpha")]}])], ports(dataplane))
    await apply(dataplane, first)

    async def on(name: str) -> bool:
        return await served_by(dataplane, host) == name

    await eventually(lambda: on("alpha"), what="the first route")
    draining_before = dataplane.stats().get("listener_manager.total_listeners_draining", 0)
    async with httpx.AsyncClient(base_url=dataplane.url, timeout=10) as client:
        import asyncio

        slow = asyncio.create_task(client.get("/?delay_ms=1500", headers={"Host": host}))
        await eventually(lambda: on("alpha"), what="alpha again")
        await apply(dataplane, world([http_route("c", [host], [{"backendRefs": [backend("beta")]}])], ports(dataplane)))
        await eventually(lambda: on("beta"), what="the changed route", timeout=5)
        reply = await slow
    assert reply.status_code == 200
    assert reply.json()["backend"] == "alpha"
    assert dataplane.stats().get("listener_manager.total_listeners_draining", 0) == draining_before


async def test_a_configuration_envoy_refuses_is_reported_and_the_last_one_kept(dataplane: DataPlane) -> None:
    host = "kept.example.com"
    good = world([http_route("k", [host], [{"backendRefs": [backend("alpha")]}])], ports(dataplane, "alpha"))
    await apply(dataplane, good)

    async def routed() -> bool:
        return await served_by(dataplane, host) == "alpha"

    await eventually(routed, what="the good configuration")
    resources = translate(good).resources
    bad = resources["routes"][0]
    bad["virtual_hosts"][0]["routes"][0]["match"] = {"safe_regex": {"regex": "("}}
    dataplane.publish(resources)

    async def refused() -> bool:
        # The virtual hosts go to Envoy one by one (VHDS): the one that does not load is what it refuses.
        return any(kind == "virtual_hosts" for kind, _ in dataplane.store.refusals)

    await eventually(refused, what="Envoy to refuse the route configuration")
    assert await served_by(dataplane, host) == "alpha"
    # What the Gateways' Programmed condition says until Envoy takes a later configuration.
    refusal = dataplane.store.refusal()
    assert refusal is not None
    assert "Envoy test refused its virtual_hosts configuration" in refusal
    dataplane.store.refusals.clear()
    await apply(dataplane, good)

    async def taken() -> bool:
        return dataplane.store.refusal() is None

    await eventually(taken, what="the good configuration to clear the refusal")
