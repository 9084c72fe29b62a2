"""The rule kinds: each manages one rule in its zone's entry-point ruleset for one phase.

What every rule kind shares is here (`RuleSpec`: `zoneRef`, `expression`, `enabled`, `description`, `priority`; the
status naming the zone, ruleset, rule, ref and version); each kind adds its action and parameters, named as the
deploy guide names them and otherwise as Cloudflare does, camelCased. Plan limits (counts, regular expressions on
Free, rate-limit periods) are left to Cloudflare, whose refusal is reported with its message.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Final, Literal, Self

from pydantic import ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from app.api.base import FieldError, KflareModel, KindInfo, PrinterColumn, Problems, wire_name
from app.api.expressions import check_expression
from app.api.meta import Status
from app.api.refs import LocalObjectReference
from app.api.resource import Resource
from app.api.text import PRINTABLE_ASCII, TEXT_SCHEMA, TextCheck

RULE_ID_LABEL: Final = "kflare.dev/rule-id"
"""Every rule kind's claim label: the ref kflare derives from the resource, which marks the rule as kflare's own."""

EXPRESSION_MAX: Final = 4096
DESCRIPTION_MAX: Final = 500
COLO_ID: Final = "cf.colo.id"

PHASE_CUSTOM: Final = "http_request_firewall_custom"
PHASE_RATELIMIT: Final = "http_ratelimit"
PHASE_MANAGED: Final = "http_request_firewall_managed"
PHASE_URL_REWRITE: Final = "http_request_transform"
PHASE_REQUEST_HEADERS: Final = "http_request_late_transform"
PHASE_RESPONSE_HEADERS: Final = "http_response_headers_transform"
PHASE_REDIRECT: Final = "http_request_dynamic_redirect"
PHASE_CACHE: Final = "http_request_cache_settings"
PHASE_CONFIG: Final = "http_config_settings"
PHASE_ORIGIN: Final = "http_request_origin"


def validate_expression(expression: str, phase: str) -> list[FieldError]:
    """Every problem with a rule's expression in `phase`, each with its position in the message: checked against
    the Rules language (`app.api.expressions`) at admission, so a typo is denied by `kubectl apply`."""
    return [FieldError("expression", str(error)) for error in check_expression(expression, phase)]


Expression = Annotated[str, Field(min_length=1, max_length=EXPRESSION_MAX, json_schema_extra=TEXT_SCHEMA), TextCheck]
Description = Annotated[str, Field(max_length=DESCRIPTION_MAX, json_schema_extra=TEXT_SCHEMA), TextCheck]
# Inside nested lists (headers, rewrites), where CEL rules would exceed the CRD's cost budget: ASCII patterns.
InnerExpression = Annotated[str, Field(pattern=PRINTABLE_ASCII, min_length=1, max_length=EXPRESSION_MAX), TextCheck]
InnerValue = Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=EXPRESSION_MAX), TextCheck]


class RuleSpec(KflareModel):
    """What every rule kind has: its zone, when it applies, whether it is on, a note and its place."""

    phase_name: ClassVar[str] = ""

    zone_ref: LocalObjectReference
    """The Zone, in the same namespace, whose ruleset holds the rule."""
    expression: Expression
    """When the rule applies, in Cloudflare's Rules language (`http.request.uri.path eq "/admin"`); custom lists
    are named `$<list name>`."""
    enabled: bool = True
    """Whether the rule is on; `false` keeps it in the ruleset, turned off."""
    description: Description | None = None
    """A note shown beside the rule in Cloudflare."""
    priority: Annotated[int, Field(ge=-2147483648, le=2147483647)] = 0
    """Where the rule goes among kflare's rules of the phase: lower first, ties by namespace and name. Rules made
    outside kflare keep their place."""

    @property
    def phase(self) -> str:
        """The ruleset phase the rule is written to."""
        return self.phase_name

    @model_validator(mode="after")
    def _check_expression(self) -> Self:
        problems = Problems()
        for error in validate_expression(self.expression, self.phase):
            problems.add("expression", error.message, self.expression)
        problems.raise_if_any(type(self).__name__)
        return self


class RuleMetadata(KflareModel):
    """Where the rule is in Cloudflare."""

    zone_id: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=256), TextCheck] | None = None
    """Cloudflare zone ID."""
    ruleset_id: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=256), TextCheck] | None = None
    """ID of the zone's entry-point ruleset of the rule's phase."""
    rule_id: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=256), TextCheck] | None = None
    """Cloudflare rule ID."""
    ref: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=256), TextCheck] | None = None
    """The rule's ref, derived from the resource's kind, namespace and name: how kflare finds its rule."""
    version: Annotated[str, Field(pattern=PRINTABLE_ASCII, max_length=64), TextCheck] | None = None
    """The rule's version in Cloudflare."""


class RuleStatus(Status):
    """What kflare last observed of the rule."""

    cloudflare_metadata: RuleMetadata | None = None
    """IDs and read-only data from Cloudflare."""


def _columns(*extra: PrinterColumn) -> tuple[PrinterColumn, ...]:
    return (
        *extra,
        PrinterColumn("Priority", ".spec.priority", type="integer"),
        PrinterColumn("Enabled", ".spec.enabled", type="boolean"),
        PrinterColumn("Rule ID", ".status.cloudflareMetadata.ruleID", priority=1),
    )


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
        claim_label=RULE_ID_LABEL,
        plural="wafcustomrules",
        short_names=("cfwaf",),
        columns=_columns(PrinterColumn("Action", ".spec.action")),
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
        claim_label=RULE_ID_LABEL,
        plural="ratelimitrules",
        short_names=("cfratelimit",),
        columns=_columns(PrinterColumn("Action", ".spec.action")),
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
        claim_label=RULE_ID_LABEL,
        plural="managedrulesets",
        short_names=("cfmanagedruleset",),
        columns=_columns(PrinterColumn("Ruleset", ".spec.rulesetID")),
        immutable=("zoneRef",),
    )


# ---- TransformRule ---------------------------------------------------------------------------------------------

TransformType = Literal["urlRewrite", "requestHeaders", "responseHeaders"]
TRANSFORM_PHASES: Final[dict[str, str]] = {
    "urlRewrite": PHASE_URL_REWRITE,
    "requestHeaders": PHASE_REQUEST_HEADERS,
    "responseHeaders": PHASE_RESPONSE_HEADERS,
}


class RewriteValue(KflareModel):
    """A static value or an expression that computes it: exactly one."""

    value: InnerValue | None = None
    """The value as it is."""
    expression: InnerExpression | None = None
    """An expression computing the value (`concat("/v2", http.request.uri.path)`)."""

    @model_validator(mode="after")
    def _one(self) -> Self:
        if (self.value is None) == (self.expression is None):
            problems = Problems()
            problems.add("value", "set exactly one of value and expression")
            problems.raise_if_any(type(self).__name__)
        return self


class URIRewrite(KflareModel):
    """The new path and/or query string the origin receives."""

    path: RewriteValue | None = None
    """The new path."""
    query: RewriteValue | None = None
    """The new query string."""


class HeaderChange(KflareModel):
    """One header operation."""

    name: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")]
    """The header's name."""
    operation: Literal["set", "add", "remove"]
    """`set` replaces it, `add` adds another (response headers only), `remove` removes it."""
    value: InnerValue | None = None
    """The value (not with remove)."""
    expression: InnerExpression | None = None
    """An expression computing the value (not with remove)."""


class TransformRuleSpec(RuleSpec):
    """A transform rule: a URL rewrite or a change of request or response headers."""

    type: TransformType
    """What it transforms; cannot change: `urlRewrite` (`uri`), `requestHeaders` or `responseHeaders`
    (`headers`)."""
    uri: URIRewrite | None = None
    """With urlRewrite: the rewritten URL."""
    headers: Annotated[list[HeaderChange], Field(max_length=30)] | None = None
    """With requestHeaders or responseHeaders: the header operations."""

    @property
    def phase(self) -> str:
        return TRANSFORM_PHASES[self.type]

    @model_validator(mode="after")
    def _check_type(self) -> Self:
        problems = Problems()
        if self.type == "urlRewrite":
            if self.headers is not None:
                problems.add("headers", "a urlRewrite rule rewrites uri, not headers")
            if self.uri is None or (self.uri.path is None and self.uri.query is None):
                problems.add("uri", "a urlRewrite rule needs uri.path or uri.query")
        else:
            if self.uri is not None:
                problems.add("uri", f"a {self.type} rule changes headers, not uri")
            if not self.headers:
                problems.add("headers", f"a {self.type} rule needs headers")
            names: set[str] = set()
            for index, header in enumerate(self.headers or []):
                where: tuple[str | int, ...] = ("headers", index)
                if header.name.lower() in names:
                    problems.add((*where, "name"), f"header {header.name} is listed twice")
                names.add(header.name.lower())
                if header.operation == "add" and self.type == "requestHeaders":
                    problems.add((*where, "operation"), "request headers are set or removed, not added")
                has_value = header.value is not None or header.expression is not None
                if header.operation == "remove" and has_value:
                    problems.add((*where, "value"), "a removed header has no value")
                if header.operation != "remove" and (header.value is None) == (header.expression is None):
                    problems.add((*where, "value"), "set exactly one of value and expression")
        problems.raise_if_any(type(self).__name__)
        return self


class TransformRule(Resource[TransformRuleSpec, RuleStatus]):
    """TransformRule manages one transform rule of a Zone: a URL rewrite, or request or response headers."""

    info = KindInfo(
        kind="TransformRule",
        claim_label=RULE_ID_LABEL,
        plural="transformrules",
        short_names=("cftransform",),
        columns=_columns(PrinterColumn("Type", ".spec.type")),
        immutable=("zoneRef", "type"),
    )


# ---- RedirectRule ----------------------------------------------------------------------------------------------


class TargetURL(RewriteValue):
    """The URL to redirect to: a static value or an expression."""


RedirectStatus = Literal[301, 302, 303, 307, 308]
REDIRECT_STATUS_DEFAULT: Final = 301
REDIRECT_SETTINGS: Final = ("status_code", "preserve_query_string")
"""The settings a redirect may give in `fromValue`, as Cloudflare nests them, or beside it, as kflare v0.2 did."""


class FromValue(KflareModel):
    """Where to redirect and how: Cloudflare's `from_value`, so a rule from its API or from Terraform's
    `cloudflare_ruleset` reads the same here."""

    target_url: TargetURL
    """The URL to redirect to."""
    status_code: RedirectStatus | None = None
    """The redirect's HTTP status: 301 (the default), 302, 303, 307 or 308."""
    preserve_query_string: bool | None = None
    """Keep the request's query string; dropped unless true."""


def _agree_rule(name: str) -> JsonDict:
    """CEL on the spec: a setting given both in `fromValue` and beside it has one value."""
    inner = f"self.fromValue.{name}"
    return {
        "rule": f"!has(self.{name}) || !has({inner}) || self.{name} == {inner}",
        "message": f"fromValue.{name} and {name} differ: set it once, in fromValue",
        "fieldPath": f".fromValue.{name}",
    }


class RedirectRuleSpec(RuleSpec):
    """A single redirect. Its status code and query string setting go in `fromValue`, as in Cloudflare's API;
    kflare v0.2's place beside `fromValue` is read too."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_agree_rule(wire_name(n)) for n in REDIRECT_SETTINGS]}
    )
    phase_name: ClassVar[str] = PHASE_REDIRECT

    from_value: FromValue
    """Where to redirect, with what status, and whether the query string is kept: Cloudflare's `from_value`."""
    status_code: RedirectStatus | None = None
    """The same as `fromValue.statusCode`, in the place kflare v0.2 read it; if both are set, they must be equal."""
    preserve_query_string: bool | None = None
    """The same as `fromValue.preserveQueryString`, in the place kflare v0.2 read it; if both are set, they must be
    equal."""

    @property
    def redirect_status_code(self) -> int:
        """The status the redirect answers with, wherever the spec gives it."""
        given = self.from_value.status_code if self.from_value.status_code is not None else self.status_code
        return REDIRECT_STATUS_DEFAULT if given is None else given

    @property
    def redirect_preserves_query_string(self) -> bool:
        """Whether the redirect keeps the query string, wherever the spec says so."""
        given = self.from_value.preserve_query_string
        return bool(self.preserve_query_string if given is None else given)

    @model_validator(mode="after")
    def _settings_agree(self) -> Self:
        problems = Problems()
        for name in REDIRECT_SETTINGS:
            inner, outer = getattr(self.from_value, name), getattr(self, name)
            if inner is not None and outer is not None and inner != outer:
                wire = wire_name(name)
                problems.add(
                    ("fromValue", wire),
                    f"{json.dumps(inner)} differs from spec.{wire} ({json.dumps(outer)}): set it once, in fromValue",
                    inner,
                )
        problems.raise_if_any(type(self).__name__)
        return self


class RedirectRule(Resource[RedirectRuleSpec, RuleStatus]):
    """RedirectRule manages one single redirect of a Zone."""

    info = KindInfo(
        kind="RedirectRule",
        claim_label=RULE_ID_LABEL,
        plural="redirectrules",
        short_names=("cfredirect",),
        # Whichever place the manifest uses: Cloudflare's first, kflare v0.2's otherwise (empty means 301).
        columns=_columns(PrinterColumn("Status Code", ".spec['fromValue.statusCode','statusCode']", type="integer")),
        immutable=("zoneRef",),
    )


# ---- CacheRule -------------------------------------------------------------------------------------------------

TTLMode = Literal["respect_origin", "bypass_by_default", "override_origin"]


class StatusCodeTTL(KflareModel):
    """A TTL for responses of one status code or a range of them."""

    status_code: Annotated[int, Field(ge=100, le=999)] | None = None
    """One status code."""
    from_: Annotated[int, Field(ge=100, le=999)] | None = None
    """The first status code of a range."""
    to: Annotated[int, Field(ge=100, le=999)] | None = None
    """The last status code of a range."""
    value: Annotated[int, Field(ge=-1)]
    """Seconds to cache; -1: do not cache, 0: do not cache and revalidate."""


class EdgeTTL(KflareModel):
    """How long the edge caches a response."""

    mode: TTLMode
    """Respect the origin's headers, bypass the cache by default, or override the origin."""
    default: Annotated[int, Field(ge=1)] | None = None
    """Seconds, with override_origin."""
    status_code_ttl: Annotated[list[StatusCodeTTL], Field(max_length=64)] | None = None
    """TTLs by status code."""


class BrowserTTL(KflareModel):
    """How long browsers cache a response."""

    mode: Literal["respect_origin", "bypass_by_default", "override_origin", "bypass"]
    """Respect the origin's headers, bypass, or override the origin."""
    default: Annotated[int, Field(ge=1)] | None = None
    """Seconds, with override_origin."""


class CacheKey(KflareModel):
    """What the cache key is made of (Free: only leaving out the whole query string)."""

    cache_by_device_type: bool | None = None
    """Cache separately for mobile, tablet and desktop."""
    cache_deception_armor: bool | None = None
    """Protect from web cache deception attacks."""
    ignore_query_strings_order: bool | None = None
    """Treat query strings with the same parameters in another order as the same."""
    ignore_query_string: bool | None = None
    """Leave the whole query string out of the cache key."""


VaryAction = Literal["bypass", "passthrough", "normalize"]
LanguageTag = Annotated[str, Field(min_length=1, max_length=35, pattern=r"^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$")]
MediaType = Annotated[
    str, Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+*-]+$")
]


class VaryDefault(KflareModel):
    """What a Vary header of the response does to the cache key when it has no header of its own listed."""

    action: VaryAction
    """`bypass`: do not cache such responses; `passthrough`: the header's value as it is in the key; `normalize`:
    the value normalized (accept-encoding, accept, accept-language)."""


class VaryHeader(KflareModel):
    """How one request header named in the response's Vary header is part of the cache key."""

    name: Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[a-z0-9!#$%&'*+.^_`|~-]+$")]
    """The request header, lowercase (`accept-language`)."""
    action: VaryAction
    """`bypass`, `passthrough` or `normalize`, as for the default."""
    languages: Annotated[list[LanguageTag], Field(max_length=64)] | None = None
    """With accept-language and normalize: the languages to normalize to (`en`, `de-CH`)."""
    media_types: Annotated[list[MediaType], Field(max_length=64)] | None = None
    """With accept and normalize: the media types to normalize to (`image/webp`)."""


class Vary(KflareModel):
    """How the response's Vary header shapes the cache key: a default and per-header settings."""

    default: VaryDefault
    """For every header the response varies on but `headers` does not list (Cloudflare requires it)."""
    headers: Annotated[list[VaryHeader], Field(max_length=16)] | None = None
    """Settings of single request headers."""

    @model_validator(mode="after")
    def _check_headers(self) -> Self:
        problems = Problems()
        seen: set[str] = set()
        for index, header in enumerate(self.headers or []):
            where: tuple[str | int, ...] = ("headers", index)
            if header.name in seen:
                problems.add((*where, "name"), f"header {header.name} is listed twice")
            seen.add(header.name)
            if header.languages is not None and header.name != "accept-language":
                problems.add((*where, "languages"), "languages are for the accept-language header only")
            if header.media_types is not None and header.name != "accept":
                problems.add((*where, "mediaTypes"), "media types are for the accept header only")
        problems.raise_if_any(type(self).__name__)
        return self


class CacheRuleSpec(RuleSpec):
    """A cache rule: cache settings for the requests it matches."""

    phase_name: ClassVar[str] = PHASE_CACHE

    cache: bool | None = None
    """Cache eligible responses (true) or bypass the cache (false)."""
    edge_ttl: EdgeTTL | None = None
    """Edge cache TTL."""
    browser_ttl: BrowserTTL | None = None
    """Browser cache TTL."""
    cache_key: CacheKey | None = None
    """The cache key."""
    vary: Vary | None = None
    """How the response's Vary header shapes the cache key."""
    respect_strong_etags: bool | None = None
    """Keep strong ETags as the origin sent them."""
    origin_error_page_passthru: bool | None = None
    """Pass the origin's error pages through."""


class CacheRule(Resource[CacheRuleSpec, RuleStatus]):
    """CacheRule manages one cache rule of a Zone."""

    info = KindInfo(
        kind="CacheRule",
        claim_label=RULE_ID_LABEL,
        plural="cacherules",
        short_names=("cfcache",),
        columns=_columns(PrinterColumn("Cache", ".spec.cache", type="boolean")),
        immutable=("zoneRef",),
    )


# ---- ConfigurationRule -----------------------------------------------------------------------------------------


class ConfigurationRuleSpec(RuleSpec):
    """A configuration rule: zone settings changed for the requests it matches."""

    phase_name: ClassVar[str] = PHASE_CONFIG

    automatic_https_rewrites: bool | None = None
    """Automatic HTTPS Rewrites."""
    browser_integrity_check: bool | None = None
    """Browser Integrity Check."""
    email_obfuscation: bool | None = None
    """Email Address Obfuscation."""
    hotlink_protection: bool | None = None
    """Hotlink Protection."""
    opportunistic_encryption: bool | None = None
    """Opportunistic Encryption."""
    polish: Literal["off", "lossless", "lossy", "webp"] | None = None
    """Polish (Free: off only)."""
    rocket_loader: bool | None = None
    """Rocket Loader."""
    security_level: Literal["off", "essentially_off", "low", "medium", "high", "under_attack"] | None = None
    """Security level (Free: not off)."""
    server_side_excludes: bool | None = None
    """Server-side Excludes."""
    ssl: Literal["off", "flexible", "full", "strict", "origin_pull"] | None = None
    """SSL/TLS encryption mode (Free: not origin_pull)."""
    disable_zaraz: bool | None = None
    """Turn Zaraz off."""
    disable_rum: bool | None = None
    """Turn Real User Monitoring off."""

    @model_validator(mode="after")
    def _some(self) -> Self:
        if not any(getattr(self, name) is not None for name in CONFIG_SETTINGS):
            problems = Problems()
            problems.add((), "a configuration rule changes at least one setting")
            problems.raise_if_any(type(self).__name__)
        return self


CONFIG_SETTINGS: Final[dict[str, str]] = {
    "automatic_https_rewrites": "automatic_https_rewrites",
    "browser_integrity_check": "bic",
    "email_obfuscation": "email_obfuscation",
    "hotlink_protection": "hotlink_protection",
    "opportunistic_encryption": "opportunistic_encryption",
    "polish": "polish",
    "rocket_loader": "rocket_loader",
    "security_level": "security_level",
    "server_side_excludes": "server_side_excludes",
    "ssl": "ssl",
    "disable_zaraz": "disable_zaraz",
    "disable_rum": "disable_rum",
}
"""Each setting's field and Cloudflare's name for it."""


class ConfigurationRule(Resource[ConfigurationRuleSpec, RuleStatus]):
    """ConfigurationRule manages one configuration rule of a Zone."""

    info = KindInfo(
        kind="ConfigurationRule",
        claim_label=RULE_ID_LABEL,
        plural="configurationrules",
        short_names=("cfconfigrule",),
        columns=_columns(),
        immutable=("zoneRef",),
    )


# ---- OriginRule ------------------------------------------------------------------------------------------------


class OriginOverride(KflareModel):
    """Where matching requests reach the origin."""

    port: Annotated[int, Field(ge=1, le=65535)]
    """The destination port."""


class OriginRuleSpec(RuleSpec):
    """An origin rule: another destination port for the requests it matches."""

    phase_name: ClassVar[str] = PHASE_ORIGIN

    origin: OriginOverride
    """The override."""


class OriginRule(Resource[OriginRuleSpec, RuleStatus]):
    """OriginRule manages one origin rule of a Zone."""

    info = KindInfo(
        kind="OriginRule",
        claim_label=RULE_ID_LABEL,
        plural="originrules",
        short_names=("cforigin",),
        columns=_columns(PrinterColumn("Port", ".spec.origin.port", type="integer")),
        immutable=("zoneRef",),
    )


RULE_KINDS: Final[tuple[type[Resource[Any, Any]], ...]] = (
    WAFCustomRule,
    RateLimitRule,
    ManagedRuleset,
    TransformRule,
    RedirectRule,
    CacheRule,
    ConfigurationRule,
    OriginRule,
)
