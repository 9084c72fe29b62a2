"""Warnings on admission: a TunnelConfiguration whose hostname nothing routes to is allowed, with a warning."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.api.tenancy import ALL_NAMESPACES, NamespacePolicy
from tests.unit.api import samples
from tests.unit.webhooks.reviews import review
from webhooks import create_app


def go_sample(**spec: Any) -> dict[str, Any]:
    """The Go controller's TunnelConfiguration (app.example.com, *.example.com, db.example.com) with `spec` changes."""
    obj = samples.load(samples.TUNNEL_CONFIGURATION)
    obj["spec"].update(spec)
    return obj


TUNNEL = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"accountRef": {"name": "my-account"}}}


def cluster(zones: list[tuple[str, str]], records: list[str]) -> Any:
    async def objects(kind: str, namespace: str | None) -> list[Mapping[str, Any]]:
        if kind == "Tunnel":
            return [TUNNEL]
        if kind == "Zone":
            return [{"metadata": {"name": n}, "spec": {"name": n, "accountRef": {"name": a}}} for n, a in zones]
        return [{"metadata": {"name": "r"}, "spec": {"name": name}} for name in records]

    return Reads(objects)


@dataclass
class Reads:
    """A cluster of these kinds' objects alone: no account, no Zone by name, no labels (nothing tenancy refuses)."""

    list: Any
    default_account_namespaces: NamespacePolicy = field(default_factory=lambda: ALL_NAMESPACES)

    async def get(self, kind: str, name: str, namespace: str | None) -> None:
        return None

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {}


async def answer(objects: Any, obj: dict[str, Any]) -> dict[str, Any]:
    app = create_app(cluster=objects)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://webhook") as http:
        body = review("CREATE", obj, kind="TunnelConfiguration")
        reply = await http.post("/validate/tunnelconfigurations", json=body)
    response: dict[str, Any] = reply.json()["response"]
    return response


async def test_a_hostname_no_zone_or_record_covers_is_allowed_with_a_warning() -> None:
    obj = go_sample()  # app.example.com, *.example.com, db.example.com
    response = await answer(cluster([("example.com", "someone-else")], ["db.example.com"]), obj)
    assert response["allowed"] is True
    warnings = response["warnings"]
    assert len(warnings) == 2
    assert "app.example.com" in warnings[0]
    assert "*.example.com" in warnings[1]
    assert all(w.startswith("spec.ingress: ") for w in warnings)


async def test_hostnames_in_a_zone_of_the_account_warn_of_nothing() -> None:
    response = await answer(cluster([("example.com", "my-account")], []), go_sample())
    assert response["allowed"] is True
    assert "warnings" not in response


async def test_a_cluster_that_cannot_be_read_in_time_gives_no_warning_and_no_delay_past_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bounds' length is not what is tested (the tenancy checks read the same cluster first).
    monkeypatch.setattr("webhooks.access.ACCESS_TIMEOUT", 0.05)
    monkeypatch.setattr("webhooks.advice.ADVICE_TIMEOUT", 0.05)

    async def hangs(kind: str, namespace: str | None) -> list[Mapping[str, Any]]:
        await asyncio.Event().wait()
        return []

    response = await answer(Reads(hangs), go_sample())
    assert response["allowed"] is True
    assert "warnings" not in response


async def test_a_denied_object_gets_its_reasons_not_warnings() -> None:
    obj = go_sample(ingress=[{"hostname": "*", "service": "http://a:80"}])
    response = await answer(cluster([], []), obj)
    assert response["allowed"] is False
    assert "spec.ingress[0].hostname" in response["status"]["message"]
