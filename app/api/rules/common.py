"""What every rule kind shares: the phases, the expression and its checks, the spec's common fields and the status."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Self

from pydantic import Field, model_validator

from app.api.base import FieldError, KflareModel, PrinterColumn, Problems
from app.api.expressions import check_expression
from app.api.meta import Status
from app.api.refs import LocalObjectReference, Refers
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

    zone_ref: Annotated[LocalObjectReference, Refers("Zone")]
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


def rule_columns(*extra: PrinterColumn) -> tuple[PrinterColumn, ...]:
    return (
        *extra,
        PrinterColumn("Priority", ".spec.priority", type="integer"),
        PrinterColumn("Enabled", ".spec.enabled", type="boolean"),
        PrinterColumn("Rule ID", ".status.cloudflareMetadata.ruleID", priority=1),
    )
