"""The rule kinds at admission, behind a real kube-apiserver with the webhooks registered: a spec Cloudflare would
refuse is denied by `kubectl apply` with the field's path and the reason; a TransformRule's type cannot change."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client.api_client import ApiClient

from tests.integration.test_webhooks import Webhook, registered, until_denied, webhook

pytestmark = pytest.mark.integration
__all__ = ["webhook"]  # the fixture, shared with the webhook tests

DENIED_RATE = 'admission webhook "ratelimitrules.validate.kflare.dev" denied the request: '


async def test_a_rule_spec_cloudflare_would_refuse_is_denied_with_its_path(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        short = webhook.manifest("RateLimitRule", "short")
        short["spec"]["ratelimit"]["mitigationTimeout"] = 5
        out = await until_denied(webhook, short, DENIED_RATE)
        assert (
            DENIED_RATE + "spec.ratelimit.mitigationTimeout: mitigationTimeout must be 0 or at least the period" in out
        )
        skip = webhook.manifest("WAFCustomRule", "skip", action="skip")
        code, out = await webhook.apply(skip)
        assert code != 0
        assert "spec.skip: a skip rule says what it skips" in out


async def test_a_transform_rules_type_cannot_change(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        probe = webhook.manifest("RateLimitRule", "probe")
        probe["spec"]["ratelimit"]["mitigationTimeout"] = 5
        await until_denied(webhook, probe, DENIED_RATE)
        rule = webhook.manifest("TransformRule", "old-api")
        code, out = await webhook.apply(rule)
        assert code == 0, out
        changed = webhook.manifest(
            "TransformRule",
            "old-api",
            type="requestHeaders",
            uri=None,
            headers=[{"name": "X-Test", "operation": "set", "value": "1"}],
        )
        code, out = await webhook.apply(changed)
        assert code != 0
        assert "spec.type" in out
        assert "type is immutable" in out


async def test_an_expression_with_a_typo_is_denied_with_its_position(kube: ApiClient, webhook: Webhook) -> None:
    async with registered(kube, webhook):
        probe = webhook.manifest("RateLimitRule", "probe")
        probe["spec"]["ratelimit"]["mitigationTimeout"] = 5
        await until_denied(webhook, probe, DENIED_RATE)  # the webhook answers
        typo = webhook.manifest("WAFCustomRule", "typo")
        typo["spec"]["expression"] = 'http.hots eq "admin.example.com"'
        code, out = await webhook.apply(typo)
        assert code != 0
        assert 'admission webhook "wafcustomrules.validate.kflare.dev" denied the request' in out
        assert 'spec.expression: unknown field "http.hots" at 1; did you mean "http.host"?' in out
