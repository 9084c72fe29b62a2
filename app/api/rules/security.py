"""WAFCustomRule, RateLimitRule and ManagedRuleset: blocking, challenging and limiting requests."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.resource import Resource
from app.api.rules.common import (
    COLO_ID,
    PHASE_CUSTOM,
    PHASE_MANAGED,
    PHASE_RATELIMIT,
    RULE_ID_LABEL,
    Expression,
    InnerValue,
    RuleSpec,
    RuleStatus,
    rule_columns,
)
from app.api.text import PRINTABLE_ASCII, TextCheck

# ---- WAFCustomRule ---------------------------------------------------------------------------------------------

WAFAction = Literal["block", "managed_challenge", "js_challenge", "challenge", "skip", "log"]
SkipProduct = Literal[
    "browserIntegrityCheck",
    "hotlinkProtection",
    "rateLimit",
    "securityLevel",
    "userAgentBlocking",
    "waf",
    "zoneLockdown",
]
SKIP_PRODUCTS: Final[dict[str, str]] = {
    "browserIntegrityCheck": "bic",
    "hotlinkProtection": "hot",
    "rateLimit": "rateLimit",
    "securityLevel": "securityLevel",
    "userAgentBlocking": "uaBlock",
    "waf": "waf",
    "zoneLockdown": "zoneLockdown",
}
"""Readable names of the security features a skip rule can skip, and Cloudflare's names for them."""
SkipPhase = Literal["http_ratelimit", "http_request_firewall_managed", "http_request_sbfm"]


class BlockResponse(KflareModel):
    """A custom response for a blocked request (not on the Free plan)."""

    status_code: Annotated[int, Field(ge=400, le=499)]
    """HTTP status of the response, 400 to 499."""
    content: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=10240), TextCheck]
    """Body of the response."""
    content_type: Literal["text/html", "text/plain", "application/json", "text/xml"] = "text/html"
    """Media type of the body."""


class SkipParameters(KflareModel):
    """What a `skip` rule skips."""

    remaining_custom_rules: bool = False
    """Skip the custom rules after this one."""
    phases: Annotated[list[SkipPhase], Field(max_length=3)] | None = None
    """Phases to skip: rate limiting, managed rules, Super Bot Fight Mode."""
    products: Annotated[list[SkipProduct], Field(max_length=7)] | None = None
    """Security features to skip."""


class WAFCustomRuleSpec(RuleSpec):
    """A custom rule of the zone's web application firewall."""

    phase_name: ClassVar[str] = PHASE_CUSTOM

    action: WAFAction
    """What happens to a matching request (`log` is Enterprise only)."""
    response: BlockResponse | None = None
    """With `block`: the response sent instead of Cloudflare's block page."""
    skip: SkipParameters | None = None
    """With `skip`: what is skipped."""
    log_matches: bool | None = None
    """With `skip`: whether matching requests are logged (Cloudflare's default: yes)."""

    @model_validator(mode="after")
    def _check_action(self) -> Self:
        problems = Problems()
        if self.response is not None and self.action != "block":
            problems.add("response", "a custom response is only for the block action")
        if self.skip is not None and self.action != "skip":
            problems.add("skip", "skip parameters are only for the skip action")
        if self.log_matches is not None and self.action != "skip":
            problems.add("logMatches", "logMatches is only for the skip action")
        if self.action == "skip":
            skip = self.skip
            if skip is None or not (skip.remaining_custom_rules or skip.phases or skip.products):
                problems.add("skip", "a skip rule says what it skips: remainingCustomRules, phases or products")
        problems.raise_if_any(type(self).__name__)
        return self


class WAFCustomRule(Resource[WAFCustomRuleSpec, RuleStatus]):
    """WAFCustomRule manages one custom rule of a Zone's web application firewall."""

    info = KindInfo(
        kind="WAFCustomRule",
        rank=130,
        permissions=(Permission("Zone · Zone WAF · Edit", "to write its rule in the zone's custom-rules phase"),),
        claim_label=RULE_ID_LABEL,
        plural="wafcustomrules",
        short_names=("cfwaf",),
        columns=rule_columns(PrinterColumn("Action", ".spec.action")),
        immutable=("zoneRef",),
    )


# ---- RateLimitRule ---------------------------------------------------------------------------------------------

RateLimitAction = Literal["block", "managed_challenge", "js_challenge", "challenge", "log"]


class RateLimitParameters(KflareModel):
    """How requests are counted and for how long a client is limited."""

    characteristics: Annotated[
        list[Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=256), TextCheck]],
        Field(
            min_length=1,
            max_length=8,
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": f"'{COLO_ID}' in self", "message": f"characteristics must include {COLO_ID}"}
                ]
            },
        ),
    ]
    """What a counter is kept per: `cf.colo.id` (required: Cloudflare counts per data center) and, say, `ip.src`."""
    period: Annotated[int, Field(ge=1, le=86400)] = 10
    """Seconds over which requests are counted (Free: 10)."""
    requests_per_period: Annotated[int, Field(ge=1)]
    """Requests allowed per period before the action applies."""
    mitigation_timeout: Annotated[int, Field(ge=0, le=86400)] = 10
    """Seconds the action lasts once triggered: 0 (only while over the rate) or at least the period."""
    counting_expression: InnerValue | None = None
    """Which requests are counted, when not those the rule's expression matches (not on Free)."""
    requests_to_origin: bool | None = None
    """Count only requests that reach the origin (not served from cache)."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        problems = Problems()
        if COLO_ID not in self.characteristics:
            problems.add("characteristics", f"characteristics must include {COLO_ID}", self.characteristics)
        if self.mitigation_timeout != 0 and self.mitigation_timeout < self.period:
            problems.add("mitigationTimeout", "mitigationTimeout must be 0 or at least the period")
        problems.raise_if_any(type(self).__name__)
        return self


class RateLimitRuleSpec(RuleSpec):
    """A rate limiting rule."""

    phase_name: ClassVar[str] = PHASE_RATELIMIT

    action: RateLimitAction = "block"
    """What happens to a client over the rate (Free: block)."""
    ratelimit: RateLimitParameters
    """The counting."""


class RateLimitRule(Resource[RateLimitRuleSpec, RuleStatus]):
    """RateLimitRule manages one rate limiting rule of a Zone."""

    info = KindInfo(
        kind="RateLimitRule",
        rank=140,
        permissions=(Permission("Zone · Zone WAF · Edit", "to write its rule in the zone's rate-limiting phase"),),
        claim_label=RULE_ID_LABEL,
        plural="ratelimitrules",
        short_names=("cfratelimit",),
        columns=rule_columns(PrinterColumn("Action", ".spec.action")),
        immutable=("zoneRef",),
    )


# ---- ManagedRuleset --------------------------------------------------------------------------------------------

SensitivityLevel = Literal["default", "medium", "low", "eoff"]


class CategoryOverride(KflareModel):
    """A change to the rules of one category of the managed ruleset."""

    category: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=128), TextCheck]
    """The category's tag."""
    action: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=32), TextCheck] | None = None
    """The action its rules take instead of their own."""
    enabled: bool | None = None
    """Turn its rules on or off."""


class RuleOverride(KflareModel):
    """A change to one rule of the managed ruleset."""

    id: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=64), TextCheck]
    """The rule's ID in the managed ruleset."""
    action: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=32), TextCheck] | None = None
    """The action it takes instead of its own."""
    enabled: bool | None = None
    """Turn it on or off."""
    score_threshold: Annotated[int, Field(ge=0, le=100)] | None = None
    """Its score threshold (scored rulesets)."""


class ManagedOverrides(KflareModel):
    """Changes to the deployed ruleset's behaviour."""

    enabled: bool | None = None
    """Turn all its rules on or off."""
    action: Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=32), TextCheck] | None = None
    """The action all its rules take."""
    sensitivity_level: SensitivityLevel | None = None
    """Sensitivity of scored rulesets."""
    categories: Annotated[list[CategoryOverride], Field(max_length=256)] | None = None
    """Per-category changes."""
    rules: Annotated[list[RuleOverride], Field(max_length=1024)] | None = None
    """Per-rule changes."""


class ManagedRulesetSpec(RuleSpec):
    """A managed ruleset deployed to the zone (an `execute` rule)."""

    phase_name: ClassVar[str] = PHASE_MANAGED

    expression: Expression = "true"
    """Which requests the ruleset sees; all of them by default."""
    ruleset_id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[0-9a-f]{32}$")]
    """The managed ruleset's ID (the Cloudflare Free Managed Ruleset is `77454fe2d30c4220b5701f6fdfb893ba`)."""
    overrides: ManagedOverrides | None = None
    """Changes to the ruleset's behaviour."""


class ManagedRuleset(Resource[ManagedRulesetSpec, RuleStatus]):
    """ManagedRuleset deploys one of Cloudflare's managed rulesets to a Zone."""

    info = KindInfo(
        kind="ManagedRuleset",
        rank=150,
        permissions=(Permission("Zone · Zone WAF · Edit", "to deploy a managed ruleset in the zone's managed phase"),),
        claim_label=RULE_ID_LABEL,
        plural="managedrulesets",
        short_names=("cfmanagedruleset",),
        columns=rule_columns(PrinterColumn("Ruleset", ".spec.rulesetID")),
        immutable=("zoneRef",),
    )
