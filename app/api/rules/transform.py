"""TransformRule and RedirectRule: rewriting a request's URL or headers, and redirecting it."""

from __future__ import annotations

import json
from typing import Annotated, ClassVar, Final, Literal, Self

from pydantic import ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems, wire_name
from app.api.resource import Resource
from app.api.rules.common import (
    PHASE_REDIRECT,
    PHASE_REQUEST_HEADERS,
    PHASE_RESPONSE_HEADERS,
    PHASE_URL_REWRITE,
    RULE_ID_LABEL,
    InnerExpression,
    InnerValue,
    RuleSpec,
    RuleStatus,
    rule_columns,
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
        rank=160,
        permissions=(
            Permission(
                "Zone · Transform Rules · Edit", "to write its rule in the URL-rewrite or header-transform phase"
            ),
        ),
        claim_label=RULE_ID_LABEL,
        plural="transformrules",
        short_names=("cftransform",),
        columns=rule_columns(PrinterColumn("Type", ".spec.type")),
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
        rank=170,
        permissions=(
            Permission("Zone · Dynamic URL Redirects · Edit", "to write its rule in the zone's redirect phase"),
        ),
        claim_label=RULE_ID_LABEL,
        plural="redirectrules",
        short_names=("cfredirect",),
        # Whichever place the manifest uses: Cloudflare's first, kflare v0.2's otherwise (empty means 301).
        columns=rule_columns(
            PrinterColumn("Status Code", ".spec['fromValue.statusCode','statusCode']", type="integer")
        ),
        immutable=("zoneRef",),
    )
