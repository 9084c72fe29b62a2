"""The xDS listener's delta ADS stream: Envoy's token checked on each stream, nothing served by a process that may
not serve, resources pushed on change and only those that changed, Envoy's refusals held until it takes a later
configuration."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import grpc
import pytest
from envoy.config.route.v3 import route_components_pb2, route_pb2
from google.protobuf import json_format

from app.xds import TokenFile
from app.xds_encoding import VIRTUAL_HOST, Encoder
from reconcilers.gateway import envoy, snapshot
from reconcilers.gateway.snapshot import SnapshotStore
from reconcilers.gateway.translate import translate
from tests.dataplane.world import backend, http_route, world
from tests.fixtures.xds import Delta, channel, listening, names
from tests.helpers import eventually

pytestmark = pytest.mark.heavy

TOKEN = "s3cret-token"
EDGE, OTHER, UNKNOWN = "kflare-gateway/team/edge", "kflare-gateway/other-team/web", "kflare-gateway/team/unknown"
EDGE_TOKEN = envoy.plane_token(TOKEN, EDGE)
"""What the edge Gateway's own plane's Secret holds (its bootstrap's credential)."""


def resources() -> dict[str, list[dict[str, Any]]]:
    return {
        "listeners": [envoy.ingress_listener("127.0.0.1", 8080)],
        "clusters": [envoy.eds_cluster("a", http2=False), envoy.eds_cluster("b", http2=True)],
        "endpoints": [envoy.load_assignment("a", [("10.0.0.1", 80)]), envoy.load_assignment("b", [])],
    }


def store(serving: bool = True) -> SnapshotStore:
    s = SnapshotStore(serving=lambda: serving)
    s.publish(resources())
    return s


def routes_world(count: int, prefix: str = "/") -> dict[str, list[dict[str, Any]]]:
    """`count` HTTPRoutes, one hostname each; the first one matches paths under `prefix`."""
    routes = [
        http_route(
            f"r{i}",
            [f"app{i}.example.com"],
            [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": prefix if i == 0 else "/"}}],
                    "backendRefs": [backend("alpha")],
                }
            ],
        )
        for i in range(count)
    ]
    out = translate(world(routes, {"alpha": 8001})).resources
    return {**out, "listeners": [envoy.ingress_listener("127.0.0.1", 8080)]}


async def subscribe_all(stream: Delta) -> dict[str, int]:
    """Subscribes as Envoy does (wildcard clusters and listeners, then the endpoints and routes they name), acks
    every response, and returns the bytes each type's first response took."""
    sizes: dict[str, int] = {}
    clusters: list[str] = []
    for key in ("clusters", "listeners", "endpoints", "routes"):
        await stream.send(key, {"clusters": [], "listeners": [], "endpoints": clusters, "routes": [envoy.INGRESS]}[key])
        reply = await stream.receive()
        clusters = clusters or names(reply)
        sizes[key] = reply.ByteSize()
        await stream.ack(reply)
    return sizes


async def test_a_wrong_or_missing_token_is_refused_and_never_echoed() -> None:
    async with listening(store(), TOKEN) as (_, port), channel(port) as ch:
        for token in (None, "", "guess", f"{TOKEN}x"):
            # No request is written: the refusal comes on the stream's metadata alone, and a write racing it would
            # make the gRPC client library replace the status with its own INTERNAL.
            stream = Delta(ch, token)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stream.receive()
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert TOKEN not in (refused.value.details() or "")


async def test_a_standby_answers_an_error_status_rather_than_stale_configuration() -> None:
    for s in (store(serving=False), SnapshotStore()):
        async with listening(s, TOKEN) as (_, port), channel(port) as ch:
            stream = Delta(ch, TOKEN)  # refused on opening: no request written (see the token test)
            assert await stream.status() == grpc.StatusCode.UNAVAILABLE


async def test_a_gateways_own_data_plane_gets_its_own_configuration_and_no_other() -> None:
    s = SnapshotStore()
    own = {**resources(), "clusters": [envoy.eds_cluster("own", http2=False)], "endpoints": []}
    s.publish(resources(), {"kflare-gateway/team/edge": own})
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        shared = Delta(ch, TOKEN)
        await shared.send("clusters")
        assert names(await shared.receive()) == ["a", "b"]
        edge = Delta(ch, EDGE_TOKEN, node="edge-1", cluster=EDGE)
        await edge.send("clusters")
        first = await edge.receive()
        assert names(first) == ["own"]
        await edge.ack(first)
        # A change to the plane's resources reaches its stream; the shared plane's stream gets nothing new.
        s.publish(
            resources(), {"kflare-gateway/team/edge": {**own, "clusters": [envoy.eds_cluster("new", http2=True)]}}
        )
        pushed = await edge.receive()
        assert names(pushed) == ["new"]
        assert list(pushed.removed_resources) == ["own"]
        # A plane the snapshot does not hold (its Gateway went, or is not this controller's) is not served.
        stranger = Delta(ch, envoy.plane_token(TOKEN, UNKNOWN), node="x", cluster=UNKNOWN)
        await stranger.send("clusters")
        assert await stranger.status() == grpc.StatusCode.UNAVAILABLE
        s.publish(resources())
        assert await edge.status() == grpc.StatusCode.UNAVAILABLE


def planes_store() -> SnapshotStore:
    s = SnapshotStore()
    edge = {**resources(), "clusters": [envoy.eds_cluster("edge-backend", http2=False)], "endpoints": []}
    other = {**resources(), "clusters": [envoy.eds_cluster("other-backend", http2=False)], "endpoints": []}
    s.publish(resources(), {EDGE: edge, OTHER: other})
    return s


async def test_a_planes_credential_fetches_its_own_planes_configuration_and_no_other() -> None:
    """Whoever reads one Gateway's plane Secret (its namespace's) holds that plane's credential: asking, with it, as
    another plane or as the shared plane is refused, whatever the node says; and the installation's token, which
    the shared plane holds, does not reach a Gateway's own plane either."""
    async with listening(planes_store(), TOKEN) as (_, port), channel(port) as ch:
        own = Delta(ch, EDGE_TOKEN, node="edge-1", cluster=EDGE)
        await own.send("clusters")
        assert names(await own.receive()) == ["edge-backend"]
        for credential, cluster in ((EDGE_TOKEN, OTHER), (EDGE_TOKEN, "kflare-data-plane"), (TOKEN, OTHER)):
            thief = Delta(ch, credential, node="thief", cluster=cluster)
            await thief.send("clusters")
            outcome = await thief.outcome()
            assert isinstance(outcome, grpc.aio.AioRpcError), f"{cluster} was served: {names(outcome)}"
            assert outcome.code() == grpc.StatusCode.PERMISSION_DENIED
            assert OTHER not in (outcome.details() or "")
            assert EDGE not in (outcome.details() or "")


async def test_a_forged_or_stale_plane_credential_is_refused() -> None:
    """A credential names its plane and carries an HMAC under the installation's token: one made up for a plane,
    or made under a token since rotated, is refused when the stream opens."""
    name = base64.urlsafe_b64encode(OTHER.encode()).decode().rstrip("=")
    forged = (f"{envoy.PLANE_TOKEN_PREFIX}{name}.{'0' * 64}", envoy.plane_token("an-old-token", OTHER))
    async with listening(planes_store(), TOKEN) as (_, port), channel(port) as ch:
        for credential in forged:
            stream = Delta(ch, credential, cluster=OTHER)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stream.receive()
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_planes_refusal_marks_that_plane_only_and_goes_with_its_stream() -> None:
    s = planes_store()
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        edge = Delta(ch, EDGE_TOKEN, node="edge-1", cluster=EDGE)
        await edge.send("clusters")
        sent = await edge.receive()
        await edge.send("clusters", nonce=sent.nonce, error="cluster edge-backend: invalid")

        async def refusing() -> bool:
            return s.refusal(EDGE) is not None

        await eventually(refusing, what="the edge plane's refusal to be held")
        assert s.refusal("") is None, "the shared plane's Gateways are told of another plane's refusal"
        assert s.refusal(OTHER) is None
        await edge.call.done_writing()
        edge.call.cancel()

        async def forgotten() -> bool:
            return s.refusal(EDGE) is None

        await eventually(forgotten, what="the refusal to go with the stream that sent it")


def test_the_refusals_held_are_bounded() -> None:
    s = SnapshotStore()
    for i in range(1000):
        s.refused("clusters", "x" * 5000, node=f"envoy-{i}", version="v", plane=f"kflare-gateway/ns/{i}")
    assert len(s.refusing) == snapshot.MAX_REFUSING
    assert all(len(message) <= snapshot.MAX_MESSAGE for _, message in s.refusing.values())
    assert s.refusal("kflare-gateway/ns/999") is not None
    assert s.refusal("kflare-gateway/ns/0") is None  # the oldest went first


async def test_subscriptions_wildcard_and_by_name() -> None:
    async with listening(store(), TOKEN) as (_, port), channel(port) as ch:
        stream = Delta(ch, TOKEN)
        await stream.send("clusters")
        clusters = await stream.receive()
        assert names(clusters) == ["a", "b"]
        assert clusters.type_url == envoy.CLUSTER
        await stream.ack(clusters)
        await stream.send("endpoints", ["b", "missing"])
        endpoints = await stream.receive()
        assert names(endpoints) == ["b"]
        # A name the snapshot does not hold is said removed, so that Envoy does not wait for it.
        assert list(endpoints.removed_resources) == ["missing"]
        await stream.ack(endpoints)
        await stream.send("endpoints", unsubscribe=["b"])
        await stream.send("endpoints", ["a"])
        assert names(await stream.receive()) == ["a"]


async def test_a_change_to_one_route_pushes_that_hostnames_virtual_host_only() -> None:
    s = SnapshotStore()
    s.publish(routes_world(50))
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        stream = Delta(ch, TOKEN)
        first = await subscribe_all(stream)
        await stream.send("virtual_hosts")
        hosts = await stream.receive()
        assert len(names(hosts)) == 50
        assert names(hosts)[0] == f"{envoy.INGRESS}/app0.example.com"
        await stream.ack(hosts)
        s.publish(routes_world(50, prefix="/v2"))
        reply = await stream.receive()
        # One virtual host, a fraction of the whole configuration; the route configuration itself is not resent.
        assert (reply.type_url, names(reply), list(reply.removed_resources)) == (
            VIRTUAL_HOST,
            [f"{envoy.INGRESS}/app0.example.com"],
            [],
        )
        assert reply.ByteSize() * 20 < hosts.ByteSize()
        await stream.ack(reply)
        # A hostname gone is said removed, by the name Envoy holds it under.
        s.publish(routes_world(49, prefix="/v2"))
        gone = await stream.receive()
        assert (names(gone), list(gone.removed_resources)) == ([], [f"{envoy.INGRESS}/app49.example.com"])
        assert first["routes"] < 1024, "the route configuration alone names VHDS, not its hosts"


async def test_the_virtual_hosts_served_one_by_one_are_the_route_configurations() -> None:
    snapshot = routes_world(5)
    configuration = snapshot["routes"][0]
    view = Encoder().encode(1, {"routes": {envoy.INGRESS: configuration}})
    head = route_pb2.RouteConfiguration.FromString(view.types["routes"].resources[envoy.INGRESS].message.resource.value)
    assert not head.virtual_hosts
    assert head.vhds.config_source.HasField("ads")
    served = {
        name: route_components_pb2.VirtualHost.FromString(e.message.resource.value)
        for name, e in view.types["virtual_hosts"].resources.items()
    }
    whole = route_pb2.RouteConfiguration()
    json_format.ParseDict({k: v for k, v in configuration.items() if k != "@type"}, whole)
    assert len(served) == len(whole.virtual_hosts) == 5
    for host in whole.virtual_hosts:
        # Envoy keeps a VHDS virtual host by its name and removes it by its resource name: they are one.
        host.name = f"{envoy.INGRESS}/{host.name}"
        assert served[host.name] == host
    # A copy of the same configuration keeps its versions: versions are the content's, not the snapshot's.
    again = Encoder().encode(2, {"routes": {envoy.INGRESS: routes_world(5)["routes"][0]}})
    assert {n: e.version for n, e in again.types["virtual_hosts"].resources.items()} == {
        n: e.version for n, e in view.types["virtual_hosts"].resources.items()
    }


async def test_an_envoy_that_reconnects_is_sent_only_what_it_does_not_hold() -> None:
    s = store()
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        stream = Delta(ch, TOKEN)
        await stream.send("clusters")
        clusters = await stream.receive()
        held = {r.name: r.version for r in clusters.resources}
        stream.call.cancel()

        s.publish({**resources(), "clusters": [*resources()["clusters"], envoy.eds_cluster("c", http2=False)]})
        again = Delta(ch, TOKEN)
        await again.send("clusters", held=held)
        assert names(await again.receive()) == ["c"]

        held["gone"] = "0"
        later = Delta(ch, TOKEN)
        await later.send("clusters", held=held)
        reply = await later.receive()
        assert (names(reply), list(reply.removed_resources)) == (["c"], ["gone"])


async def test_a_refusal_is_held_until_envoy_takes_a_later_configuration() -> None:
    s = store()
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        stream = Delta(ch, TOKEN, node="envoy-7")
        await stream.send("clusters")
        await stream.ack(await stream.receive())
        s.publish({**resources(), "clusters": [envoy.eds_cluster("bad", http2=False)]})
        bad = await stream.receive()
        assert names(bad) == ["bad"]
        assert list(bad.removed_resources) == ["a", "b"]
        await stream.send("clusters", nonce=bad.nonce, error="cluster bad: invalid")

        async def refusing() -> bool:
            return s.refusal() is not None

        await eventually(refusing, what="the refusal to be held")
        assert "Envoy envoy-7 refused its clusters configuration: cluster bad: invalid" in str(s.refusal())
        s.publish({**resources(), "clusters": [envoy.eds_cluster("good", http2=False)]})
        good = await stream.receive()
        assert (names(good), list(good.removed_resources)) == (["good"], ["bad"])
        assert s.refusal() is not None, "held until Envoy takes the later configuration"
        await stream.ack(good)

        async def cleared() -> bool:
            return s.refusal() is None

        await eventually(cleared, what="the refusal to clear")


async def test_losing_leadership_ends_the_stream_with_an_error_status() -> None:
    serving = [True]
    s = SnapshotStore(serving=lambda: serving[0])
    s.publish(resources())
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        stream = Delta(ch, TOKEN)
        await stream.send("clusters")
        await stream.receive()
        serving[0] = False
        s.clear()
        assert await stream.status() == grpc.StatusCode.UNAVAILABLE


async def test_a_resource_that_does_not_encode_is_reported_and_left_alone() -> None:
    s = store()
    async with listening(s, TOKEN) as (_, port), channel(port) as ch:
        stream = Delta(ch, TOKEN)
        await stream.send("clusters")
        await stream.ack(await stream.receive())
        broken = {**envoy.eds_cluster("a", http2=False), "no_such_field": 1}
        s.publish({**resources(), "clusters": [broken, envoy.eds_cluster("c", http2=False)]})
        reply = await stream.receive()
        assert (names(reply), list(reply.removed_resources)) == (["c"], ["b"])
        refusal = s.refusal()
        assert refusal is not None
        assert "a does not encode" in refusal


async def test_a_rotated_token_is_asked_for_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    token = TokenFile(path)
    s = store()
    async with listening(s, lambda: token.value) as (_, port), channel(port) as ch:

        async def opens(presented: str) -> Delta:
            stream = Delta(ch, presented)
            await stream.send("clusters")
            await stream.receive()
            return stream

        held = await opens(TOKEN)
        path.write_text("")  # the Secret half updated: the current token stays
        assert not token.reload()
        await opens(TOKEN)
        path.write_text("rotated-token")
        assert token.reload()
        await opens("rotated-token")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await Delta(ch, TOKEN).receive()  # refused on opening: no request written (see the token test)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # A stream opened with the old token is ended the next time it wakes.
        s.publish({**resources(), "clusters": [envoy.eds_cluster("c", http2=False)]})
        assert await held.status() == grpc.StatusCode.UNAUTHENTICATED


def test_a_token_file_that_holds_nothing_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(" \n")
    with pytest.raises(ValueError, match="holds no token"):
        TokenFile(tmp_path / "token")
