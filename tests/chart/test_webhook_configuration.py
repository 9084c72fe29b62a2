"""The webhooks `kflare dev` and the tests register (`webhooks.configuration`) are the chart's, but for how the API
server reaches them and the chart's exception for the controller's own ServiceAccount."""

from __future__ import annotations

from typing import Any

from app.api import KINDS
from tests.chart.helm import Helm
from webhooks.configuration import configuration, url_client_config


def _comparable(hook: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in hook.items() if k != "clientConfig"}
    out["matchConditions"] = [c for c in hook.get("matchConditions", []) if c["name"] != "not-the-controller"]
    return out


def test_the_generated_webhooks_are_the_charts(helm: Helm) -> None:
    chart = helm.render().one("ValidatingWebhookConfiguration")
    charted = {hook["name"]: _comparable(hook) for hook in chart["webhooks"]}
    generated = configuration("kflare", url_client_config("https://127.0.0.1:9443", b"ca"))
    assert len(generated["webhooks"]) == len(KINDS)
    for hook in generated["webhooks"]:
        assert _comparable(hook) == charted[hook["name"]]
    assert [h["name"] for h in generated["webhooks"]] == [
        n for n in charted if n in {h["name"] for h in generated["webhooks"]}
    ]
