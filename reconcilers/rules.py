"""The rule kinds on the ruleset engine (`reconcilers.rulesets`): each gives its action and its parameters, named as
Cloudflare names them. Unset optional settings are not sent, so Cloudflare's defaults apply to them."""

from __future__ import annotations

from pydantic import JsonValue

from app.api.base import KflareModel
from app.api.rules.cache import CacheRule, CacheRuleSpec
from app.api.rules.configuration import (
    CONFIG_SETTINGS,
    ConfigurationRule,
    ConfigurationRuleSpec,
    OriginRule,
    OriginRuleSpec,
)
from app.api.rules.security import (
    SKIP_PRODUCTS,
    ManagedRuleset,
    ManagedRulesetSpec,
    RateLimitRule,
    RateLimitRuleSpec,
    WAFCustomRule,
    WAFCustomRuleSpec,
)
from app.api.rules.transform import (
    TRANSFORM_PHASES,
    RedirectRule,
    RedirectRuleSpec,
    RewriteValue,
    TransformRule,
    TransformRuleSpec,
)
from app.cloudflare.models import Ruleset
from app.kube.client import JSON
from reconcilers.rulesets import RuleBody, RuleKind, RuleLink


def _snake(model: KflareModel | None) -> dict[str, JsonValue] | None:
    """A model's set fields under Cloudflare's snake_case names (the models name them alike, camelCased)."""
    return None if model is None else model.model_dump(mode="json", exclude_none=True)


def _value(value: RewriteValue) -> dict[str, str]:
    return {"value": value.value} if value.value is not None else {"expression": value.expression or ""}


class WAFCustomRuleKind(RuleKind[WAFCustomRule, WAFCustomRuleSpec]):
    model = WAFCustomRule

    def action(self, spec: WAFCustomRuleSpec) -> str:
        return spec.action

    def parameters(self, spec: WAFCustomRuleSpec) -> RuleBody | None:
        if spec.action == "block" and spec.response is not None:
            return {"response": _snake(spec.response)}
        if spec.action == "skip" and spec.skip is not None:
            skip: RuleBody = {}
            if spec.skip.remaining_custom_rules:
                skip["ruleset"] = "current"
            if spec.skip.phases:
                skip["phases"] = list(spec.skip.phases)
            if spec.skip.products:
                skip["products"] = [SKIP_PRODUCTS[p] for p in spec.skip.products]
            return skip
        return None

    def extras(self, spec: WAFCustomRuleSpec) -> RuleBody:
        if spec.action == "skip" and spec.log_matches is not None:
            return {"logging": {"enabled": spec.log_matches}}
        return {}


class RateLimitRuleKind(RuleKind[RateLimitRule, RateLimitRuleSpec]):
    model = RateLimitRule

    def action(self, spec: RateLimitRuleSpec) -> str:
        return spec.action

    def extras(self, spec: RateLimitRuleSpec) -> RuleBody:
        return {"ratelimit": _snake(spec.ratelimit)}


class ManagedRulesetKind(RuleKind[ManagedRuleset, ManagedRulesetSpec]):
    """Deploys a managed ruleset: an `execute` rule. Each ruleset deploys once per zone, so a rule already
    deploying it (another ManagedRuleset's, or one made outside kflare) is a `RulesetConflict`; the last one deleted
    deletes the entry point, which hands the zone back to Cloudflare's default (the Free Managed Ruleset)."""

    model = ManagedRuleset
    drops_empty_entrypoint = True

    def action(self, spec: ManagedRulesetSpec) -> str:
        return "execute"

    def parameters(self, spec: ManagedRulesetSpec) -> RuleBody | None:
        parameters: RuleBody = {"id": spec.ruleset_id}
        overrides = _snake(spec.overrides)
        if overrides:
            parameters["overrides"] = overrides
        return parameters

    def observed_parameters(self, parameters: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        # Cloudflare answers the version it runs ("latest"), which kflare does not set.
        return None if parameters is None else {k: v for k, v in parameters.items() if k != "version"}

    async def conflict(self, link: RuleLink, obj: ManagedRuleset, ruleset: Ruleset | None) -> str | None:
        ref = self.ref_of(obj)
        for rule in [] if ruleset is None else ruleset.rules:
            if rule.ref == ref or rule.action != "execute":
                continue
            if (rule.action_parameters or {}).get("id") == obj.spec.ruleset_id:
                return (
                    f"managed ruleset {obj.spec.ruleset_id} is already deployed in this zone by rule {rule.id}; "
                    "a zone deploys each ruleset once"
                )
        return None


class TransformRuleKind(RuleKind[TransformRule, TransformRuleSpec]):
    """Writes to the phase of its type (immutable, so a rule never moves between phases)."""

    model = TransformRule

    @classmethod
    def phase_of(cls, spec: JSON) -> str:
        return TRANSFORM_PHASES.get(str(spec.get("type")), "")

    def action(self, spec: TransformRuleSpec) -> str:
        return "rewrite"

    def parameters(self, spec: TransformRuleSpec) -> RuleBody | None:
        if spec.type == "urlRewrite":
            uri: RuleBody = {}
            if spec.uri is not None and spec.uri.path is not None:
                uri["path"] = _value(spec.uri.path)
            if spec.uri is not None and spec.uri.query is not None:
                uri["query"] = _value(spec.uri.query)
            return {"uri": uri}
        headers: RuleBody = {}
        for header in spec.headers or []:
            change: RuleBody = {"operation": header.operation}
            if header.value is not None:
                change["value"] = header.value
            if header.expression is not None:
                change["expression"] = header.expression
            headers[header.name] = change
        return {"headers": headers}


class RedirectRuleKind(RuleKind[RedirectRule, RedirectRuleSpec]):
    """Sends the status and the query string setting always, wherever the spec gives them, so a manifest moved
    from kflare v0.2's form to Cloudflare's nesting with the same values changes nothing in Cloudflare."""

    model = RedirectRule

    def action(self, spec: RedirectRuleSpec) -> str:
        return "redirect"

    def parameters(self, spec: RedirectRuleSpec) -> RuleBody | None:
        return {
            "from_value": {
                "target_url": _value(spec.from_value.target_url),
                "status_code": spec.redirect_status_code,
                "preserve_query_string": spec.redirect_preserves_query_string,
            }
        }


class CacheRuleKind(RuleKind[CacheRule, CacheRuleSpec]):
    model = CacheRule

    def action(self, spec: CacheRuleSpec) -> str:
        return "set_cache_settings"

    def parameters(self, spec: CacheRuleSpec) -> RuleBody | None:
        out: RuleBody = {}
        if spec.cache is not None:
            out["cache"] = spec.cache
        if spec.edge_ttl is not None:
            edge: RuleBody = {"mode": spec.edge_ttl.mode}
            if spec.edge_ttl.default is not None:
                edge["default"] = spec.edge_ttl.default
            if spec.edge_ttl.status_code_ttl:
                edge["status_code_ttl"] = [
                    {"value": t.value, "status_code": t.status_code}
                    if t.status_code is not None
                    else {"value": t.value, "status_code_range": {"from": t.from_, "to": t.to}}
                    for t in spec.edge_ttl.status_code_ttl
                ]
            out["edge_ttl"] = edge
        if spec.browser_ttl is not None:
            out["browser_ttl"] = _snake(spec.browser_ttl)
        if spec.cache_key is not None:
            key = _snake(spec.cache_key) or {}
            if key.pop("ignore_query_string", False):
                key["custom_key"] = {"query_string": {"exclude": {"all": True}}}
            out["cache_key"] = key
        if spec.vary is not None:
            # Cloudflare keys the headers by name; the spec lists them, as Kubernetes lists prefer.
            vary: RuleBody = {"default": {"action": spec.vary.default.action}}
            if spec.vary.headers:
                vary["headers"] = {
                    h.name: {k: v for k, v in (_snake(h) or {}).items() if k != "name"} for h in spec.vary.headers
                }
            out["vary"] = vary
        for name in ("respect_strong_etags", "origin_error_page_passthru"):
            value = getattr(spec, name)
            if value is not None:
                out[name] = value
        return out


class ConfigurationRuleKind(RuleKind[ConfigurationRule, ConfigurationRuleSpec]):
    model = ConfigurationRule

    def action(self, spec: ConfigurationRuleSpec) -> str:
        return "set_config"

    def parameters(self, spec: ConfigurationRuleSpec) -> RuleBody | None:
        return {cf: getattr(spec, name) for name, cf in CONFIG_SETTINGS.items() if getattr(spec, name) is not None}


class OriginRuleKind(RuleKind[OriginRule, OriginRuleSpec]):
    model = OriginRule

    def action(self, spec: OriginRuleSpec) -> str:
        return "route"

    def parameters(self, spec: OriginRuleSpec) -> RuleBody | None:
        return {"origin": {"port": spec.origin.port}}
