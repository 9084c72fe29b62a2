"""GRPCRoutes through Envoy to cleartext HTTP/2 (h2c) backends: method and header matches."""

from __future__ import annotations

import httpx

from reconcilers.gateway.translate import translate
from tests.dataplane.world import backend, grpc_route, world
from tests.fixtures.cloudflared import GrpcReply
from tests.fixtures.envoy import DataPlane
from tests.helpers import eventually


async def call(plane: DataPlane, host: str, method: str, **headers: str) -> tuple[str | None, bytes]:
    async with httpx.AsyncClient(base_url=plane.url, http1=False, http2=True, timeout=5) as client:
        reply = await client.post(
            method,
            content=b"\x00\x00\x00\x00\x00",
            headers={"Host": host, "content-type": "application/grpc", "te": "trailers", **headers},
        )
    return reply.headers.get("x-backend"), reply.content


async def test_grpc_method_and_header_matches_reach_h2c_backends(dataplane: DataPlane) -> None:
    rules = [
        {
            "matches": [{"method": {"service": "echo.Echo", "method": "Say"}}],
            "backendRefs": [backend("grpc-a")],
        },
        {
            "matches": [{"headers": [{"name": "x-tier", "value": "gold"}]}],
            "backendRefs": [backend("grpc-b")],
        },
        {
            "matches": [{"method": {"type": "RegularExpression", "service": "admin\\..*"}}],
            "backendRefs": [backend("grpc-b")],
        },
    ]
    ports = {name: dataplane.backend_ports[name] for name in ("grpc-a", "grpc-b")}
    w = world([], ports, grpc=[grpc_route("rpc", ["rpc.example.com"], rules)])
    dataplane.publish(translate(w).resources)

    async def routed() -> bool:
        return (await call(dataplane, "rpc.example.com", "/echo.Echo/Say"))[0] == "grpc-a"

    await eventually(routed, what="the gRPC method route")
    backend_name, body = await call(dataplane, "rpc.example.com", "/echo.Echo/Say")
    assert backend_name == "grpc-a"
    assert body[5:] == b"grpc-a /echo.Echo/Say"
    assert (await call(dataplane, "rpc.example.com", "/echo.Echo/Other", **{"x-tier": "gold"}))[0] == "grpc-b"
    assert (await call(dataplane, "rpc.example.com", "/admin.Users/List"))[0] == "grpc-b"
    assert (await call(dataplane, "rpc.example.com", "/echo.Echo/Other"))[0] is None


async def test_grpc_through_cloudflared_keeps_its_status_and_trailers_over_the_tls_origin(dataplane: DataPlane) -> None:
    rules = [{"backendRefs": [backend("grpc-a")]}]
    w = world([], {"grpc-a": dataplane.backend_ports["grpc-a"]}, grpc=[grpc_route("rpc", ["api.example.com"], rules)])
    edge = await dataplane.through_cloudflared(w)
    rule = edge.rule("api.example.com")
    assert rule["service"] == f"https://127.0.0.1:{dataplane.tls_port}"
    assert rule["originRequest"] == {
        "http2Origin": True,
        "originServerName": "kflare-data-plane",
        "caPool": f"{dataplane.tls_dir}/ca.crt",
    }

    async def answered() -> GrpcReply | None:
        reply = await edge.grpc("api.example.com", "/echo.Echo/Say", b"hi")
        return reply if reply.status == "0" else None

    unary = await eventually(answered, what="the gRPC call to be answered")
    assert unary.headers[":status"] == "200"
    assert unary.messages == [b"grpc-a /echo.Echo/Say"]
    assert unary.trailers == {"grpc-status": "0", "x-served-by": "grpc-a"}

    stream = await edge.grpc("api.example.com", "/echo.Echo/Stream")
    assert stream.messages == [f"grpc-a /echo.Echo/Stream #{i}".encode() for i in range(3)]
    assert stream.trailers["grpc-status"] == "0"

    failed = await edge.grpc("api.example.com", "/echo.Echo/Fail")
    assert failed.status == "5"
    assert failed.headers["grpc-message"] == "grpc-a has no such thing"
    assert failed.messages == []
