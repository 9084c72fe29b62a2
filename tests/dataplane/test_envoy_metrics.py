"""What the dashboard's data-plane row reads of Envoy is what Envoy serves: after a request answered and one that a
backend failed, every `envoy_*` series the chart's dashboard names is on Envoy's Prometheus page with the labels
the panels select and group by. (cloudflared's series are its documented ones; no real cloudflared runs here.)"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import httpx

from tests.dataplane.world import backend, http_route, world
from tests.fixtures.envoy import DataPlane
from tests.helpers import eventually

DASHBOARD = Path(__file__).resolve().parents[2] / "chart" / "kflare" / "dashboards" / "kflare.json"
SERIES = re.compile(r"(envoy_[a-zA-Z0-9_]*)\{([^}]*)\}")
LABEL = re.compile(r'(\w+)\s*(?:=~|=|!=)\s*"([^"]*)"')
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$")
LABEL_VALUE = re.compile(r'(\w+)="([^"]*)"')


def dashboard_series() -> list[tuple[str, dict[str, str]]]:
    """Each `envoy_*` selector of the dashboard: its name, and the label matchers other than the namespace
    Prometheus adds (values as regexes)."""
    board = json.loads(DASHBOARD.read_text())
    found = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            for name, matchers in SERIES.findall(target["expr"]):
                labels = {k: v for k, v in LABEL.findall(matchers) if k != "namespace"}
                found.append((name, labels))
    return found


async def test_the_dashboards_envoy_series_are_served(dataplane: DataPlane) -> None:
    await dataplane.apply(
        world(
            [http_route("metrics", ["metrics.example.com"], [{"backendRefs": [backend("alpha")]}])],
            {"alpha": dataplane.backend_ports["alpha"]},
        )
    )
    async with httpx.AsyncClient(base_url=dataplane.url, timeout=10) as client:

        async def answered() -> bool:
            return (await client.get("/", headers={"Host": "metrics.example.com"})).status_code == 200

        await eventually(answered, what="the route to answer")
        failed = await client.get("/", params={"fail": "1", "key": "metrics"}, headers={"Host": "metrics.example.com"})
        assert failed.status_code == 503
    wanted = dashboard_series()
    assert {name for name, _ in wanted} >= {"envoy_http_downstream_rq_total", "envoy_cluster_upstream_rq_time_bucket"}

    def served() -> dict[str, list[dict[str, str]]]:
        url = f"http://127.0.0.1:{dataplane.admin_port}/stats/prometheus"
        with urllib.request.urlopen(url, timeout=5) as reply:
            text = reply.read().decode()
        # Read as Prometheus stores it: a sample's name as written (a text parser would add `_total` to counters).
        samples: dict[str, list[dict[str, str]]] = {}
        for line in text.splitlines():
            found = SAMPLE.match(line)
            if found:
                samples.setdefault(found[1], []).append(dict(LABEL_VALUE.findall(found[2] or "")))
        return samples

    async def all_served() -> bool:
        samples = served()
        for name, labels in wanted:
            matching = [
                s for s in samples.get(name, []) if all(re.fullmatch(v, s.get(k, "")) for k, v in labels.items())
            ]
            assert matching, f"{name} with {labels}: not served (served with: {samples.get(name, [])[:5]})"
        return True

    # Envoy flushes histograms to its stats page every few seconds.
    await eventually(all_served, timeout=30, what="every Envoy series the dashboard reads")
