"""Scenario 5: no token or secret value of the session shows anywhere the controller writes for people to read.

It runs last (tests/chaos/conftest.py orders it so) and searches for every value in the registry
(tests/chaos/secrets.py: the values other scenarios made with `secret_value()`, the tokens the emulator issued, what
the controller wrote into Secrets) and for each value's base64 form, in:

- every log line of every controller process of the session (their logs under the session's temporary directory);
- every Event: those still in the API server, and every Event write of the session in its audit log (Events of
  namespaces deleted since are in it too);
- every status of every kflare object: the objects still there, and every write of a kflare object of the session
  in the audit log (the API server's answer holds the object with its status);
- every line of the controller's /metrics, scraped while its resources were Ready and while one was failing;
- every error: the warning and error log lines and the Ready=False messages are among the above.

It makes traffic of its own first, so that it means something when run alone (`-k secrets`): a unit of every kind
(tests/chaos/crashes.py) with a token of its own the emulator issued; a WorkerScript with a secret binding from a
Secret; a Tunnel, whose token the controller writes into a Secret; and an account whose token Cloudflare refuses.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app.api.registry import KINDS
from app.controlplane import ControlPlane, free_port
from tests.chaos.crashes import clean_up, make_units, register_written_secrets, start_controller
from tests.chaos.figures import Figures
from tests.chaos.secrets import FRAGMENTS, SECRETS, register, secret_value
from tests.chaos.secrets_audit import AuditLog
from tests.fixtures.controller import GROUP, VERSION, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually
from tests.kinds import NEW_CODE, SAMPLES

pytestmark = pytest.mark.integration

SCENARIO = "5 secrets"


def scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return [line for line in reply.read().decode().splitlines() if line and not line.startswith("#")]


def needles() -> set[str]:
    """Each form searched for: the values, their base64, the ends of their random parts."""
    return {*SECRETS, *(base64.b64encode(v.encode()).decode() for v in SECRETS), *FRAGMENTS}


class Search:
    def __init__(self) -> None:
        forms = needles()
        self.forms = forms
        self.pattern = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
        self.searched: dict[str, int] = {}
        self.hits: list[str] = []

    def __call__(self, place: str, texts: list[str]) -> None:
        self.searched[place] = self.searched.get(place, 0) + len(texts)
        for text in texts:
            for found in self.pattern.finditer(text):
                self.hits.append(f"{place}: {found.group()[:6]}... in {text[:300]}")


@pytest.mark.timeout(600)
async def test_no_secret_value_in_logs_events_statuses_or_metrics(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kube: ApiClient,
    audit: AuditLog,
    figures: Figures,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    emulator = fresh_emulator
    emulator.set_rate_limit(1_000_000, 300, 1)
    emulator.set_options(lists_per_account=10)
    token = register(emulator.add_token(["*"], name="chaos-secrets", value=secret_value("token"))["value"])
    metrics_port = free_port()
    proc = start_controller(
        control_plane,
        emulator,
        tmp_path,
        "--drift-check-interval=2s",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        "--metrics-secure=false",
    )
    metric_lines: list[str] = []
    units = []
    try:
        units = await make_units(kube, emulator, [(kind, "create") for kind in sorted(SAMPLES)], token=token)
        for unit in units:
            await unit.sample.apply(unit.kflare, unit.ctx, {})
        for unit in units:
            await unit.kflare.ready(unit.kind, unit.sample.name, timeout=90)
        worker = next(u for u in units if u.kind == "WorkerScript").kflare
        await secret_binding(worker)
        metric_lines += scrape(metrics_port)
        async with refused_token(worker, emulator):
            metric_lines += scrape(metrics_port)
        await register_written_secrets(units)
    finally:
        try:
            await clean_up(units)
        finally:
            proc.stop()

    search = Search()
    logs = sorted(tmp_path_factory.getbasetemp().rglob("controller-*.log"))
    lines = [line for path in logs for line in path.read_text(errors="replace").splitlines()]
    search("log lines", lines)
    search(
        "errors (warning and error log lines)",
        [line for line in lines if '"level": "warning"' in line or '"level": "error"' in line],
    )
    audited = list(audit.lines())
    search("Event writes (audit log)", [line for line in audited if '"resource":"events"' in line])
    search(
        "kflare object writes with status (audit log)", [line for line in audited if '"apiGroup":"kflare.dev"' in line]
    )
    events = await client.CoreV1Api(kube).list_event_for_all_namespaces()
    search("Events", [json.dumps(kube.sanitize_for_serialization(e)) for e in events.items])
    objects = client.CustomObjectsApi(kube)
    statuses: list[str] = []
    for model in KINDS:
        listing = await objects.list_cluster_custom_object(GROUP, VERSION, model.info.plural)
        statuses += [json.dumps(item.get("status") or {}) for item in listing["items"]]
    search("statuses (objects now)", statuses)
    search("metric lines", metric_lines)

    figures.record(SCENARIO, "values searched (with their base64 and the ends of random parts)", len(SECRETS))
    figures.record(SCENARIO, "controller processes searched", len(logs))
    for place, count in search.searched.items():
        figures.record(SCENARIO, f"{place} searched", count)
    figures.record(SCENARIO, "hits", len(search.hits), target="0", ok=not search.hits)
    assert len(SECRETS) >= 4
    assert search.searched["log lines"] > 0
    assert search.searched["metric lines"] > 0
    assert not search.hits, "\n".join(search.hits[:20])


async def secret_binding(kflare: Kflare) -> None:
    """A Worker with a secret bound from a Secret: its value goes to Cloudflare and nowhere else."""
    await kflare.core.create_namespaced_secret(
        kflare.namespace,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="worker-secret"), string_data={"value": secret_value("binding")}
        ),
    )
    await kflare.apply(
        {
            "kind": "WorkerScript",
            "metadata": {"name": "with-secret"},
            "spec": {
                "accountRef": {"name": kflare.account},
                "name": f"with-secret-{kflare.namespace[-4:]}",
                "script": NEW_CODE,
                "bindings": [{"name": "API_KEY", "secretKeyRef": {"name": "worker-secret", "key": "value"}}],
            },
        }
    )
    await kflare.ready("WorkerScript", "with-secret", timeout=60)


@contextlib.asynccontextmanager
async def refused_token(kflare: Kflare, emulator: EmulatorProcess) -> AsyncIterator[None]:
    """An account whose token Cloudflare does not know, failing while in the block: its errors name no token."""
    bad = f"{kflare.account}-refused"
    await kflare.token_secret(secret_value("refused"), name="refused-token")
    await kflare.apply(
        {
            "kind": "CloudflareAccount",
            "metadata": {"name": bad},
            "spec": {
                "accountID": emulator.account_id,
                "tokenSecretRef": {"name": "refused-token", "namespace": kflare.namespace},
            },
        }
    )

    async def failing() -> dict[str, Any]:
        obj = await kflare.get("CloudflareAccount", bad)
        conditions = (obj.get("status") or {}).get("conditions") or []
        assert any(c["type"] == "Ready" and c["status"] == "False" for c in conditions), conditions
        return obj

    await eventually(failing, timeout=60, what="the refused account to say so")
    try:
        yield
    finally:
        await kflare.delete("CloudflareAccount", bad)


def test_the_search_finds_a_value_and_its_base64() -> None:
    """The search above would see a leak: a value in a log line, in base64 (as in a Secret's data), cut short."""
    value = secret_value("probe")
    search = Search()
    cut_short = value[: len(value) - 10] + "..."
    texts = [json.dumps({"msg": f"token {value}"}), base64.b64encode(value.encode()).decode(), cut_short, "nothing"]
    search("probe", texts)
    assert len(search.hits) == 3, search.hits
