"""The xDS listener: Envoy's token checked, nothing served by a process that may not answer, 304 for a current
version, routes and endpoints answered by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.xds import TokenFile, xds_app
from reconcilers.gateway import envoy
from reconcilers.gateway.snapshot import SnapshotStore

TOKEN = "s3cret-token"


def request(token: str | None = TOKEN, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"id": "envoy-1"}
    if token is not None:
        node["metadata"] = {envoy.TOKEN_METADATA: token}
    return {"node": node, **extra}


def store(serving: bool = True) -> SnapshotStore:
    s = SnapshotStore(serving=lambda: serving)
    s.publish(
        {
            "listeners": [envoy.ingress_listener("127.0.0.1", 8080, 0.5)],
            "clusters": [
                envoy.eds_cluster("a", http2=False, refresh=0.5),
                envoy.eds_cluster("b", http2=True, refresh=0.5),
            ],
            "endpoints": [envoy.load_assignment("a", [("10.0.0.1", 80)]), envoy.load_assignment("b", [])],
        }
    )
    return s


async def post(s: SnapshotStore, type_key: str, body: dict[str, Any]) -> httpx.Response:
    transport = httpx.ASGITransport(app=xds_app(s, lambda: TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://xds") as client:
        return await client.post(f"/v3/discovery:{type_key}", json=body)


async def test_a_wrong_or_missing_token_is_refused_and_never_echoed() -> None:
    for token in (None, "", "guess"):
        reply = await post(store(), "clusters", request(token))
        assert reply.status_code == 401
        assert TOKEN not in reply.text


async def test_a_standby_answers_nothing_rather_than_stale_configuration() -> None:
    assert (await post(store(serving=False), "clusters", request())).status_code == 503
    assert (await post(SnapshotStore(), "clusters", request())).status_code == 503


async def test_versions_and_names() -> None:
    s = store()
    reply = await post(s, "clusters", request())
    assert reply.status_code == 200
    body = reply.json()
    assert [c["name"] for c in body["resources"]] == ["a", "b"]
    assert body["type_url"] == envoy.CLUSTER
    assert (await post(s, "clusters", request(version_info=body["version_info"]))).status_code == 304
    endpoints = (await post(s, "endpoints", request(resource_names=["b"]))).json()
    assert [e["cluster_name"] for e in endpoints["resources"]] == ["b"]
    # A NACK (error_detail) is answered in full again, not with a 304.
    nack = request(version_info=body["version_info"], error_detail={"message": "bad"})
    assert (await post(s, "clusters", nack)).status_code == 200


async def test_an_identical_snapshot_keeps_its_version() -> None:
    first, second = store(), store()
    a = (await post(first, "clusters", request())).json()["version_info"]
    b = (await post(second, "clusters", request())).json()["version_info"]
    assert a == b


async def test_a_refusal_is_held_until_envoy_takes_a_later_configuration() -> None:
    s = store()
    transport = httpx.ASGITransport(app=xds_app(s, lambda: TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://xds") as http:

        async def poll(**extra: Any) -> httpx.Response:
            return await http.post("/v3/discovery:clusters", json=request(**extra))

        first = (await poll()).json()["version_info"]
        s.publish({"clusters": [envoy.eds_cluster("bad", http2=False, refresh=0.5)]})
        assert (await poll(version_info=first)).status_code == 200
        await poll(version_info=first, error_detail={"message": "cluster bad: invalid"})
        refusal = s.refusal()
        assert refusal is not None
        assert "refused its clusters configuration: cluster bad: invalid" in refusal
        await poll(version_info=first)  # still on the old one
        assert s.refusal() is not None
        s.publish({"clusters": [envoy.eds_cluster("good", http2=False, refresh=0.5)]})
        taken = (await poll(version_info=first)).json()["version_info"]
        assert (await poll(version_info=taken)).status_code == 304
        assert s.refusal() is None


async def test_a_rotated_token_is_asked_for_without_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    token = TokenFile(path)
    transport = httpx.ASGITransport(app=xds_app(store(), lambda: token.value))
    async with httpx.AsyncClient(transport=transport, base_url="http://xds") as http:

        async def status(presented: str) -> int:
            return (await http.post("/v3/discovery:clusters", json=request(presented))).status_code

        assert await status(TOKEN) == 200
        path.write_text("")  # the Secret half updated: the current token stays
        assert not token.reload()
        assert await status(TOKEN) == 200
        path.write_text("rotated-token")
        assert token.reload()
        assert await status("rotated-token") == 200
        assert await status(TOKEN) == 401, "the old token no longer admits"


def test_a_token_file_that_holds_nothing_is_refused_at_start(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(" \n")
    with pytest.raises(ValueError, match="holds no token"):
        TokenFile(tmp_path / "token")
