"""ConfigurationRule and OriginRule: settings Cloudflare applies to the requests a rule matches, and where
it sends them."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.resource import Resource
from app.api.rules.common import PHASE_CONFIG, PHASE_ORIGIN, RULE_ID_LABEL, RuleSpec, RuleStatus, rule_columns

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
        rank=190,
        permissions=(
            Permission("Zone · Config Settings · Edit", "to write its rule in the zone's configuration phase"),
        ),
        claim_label=RULE_ID_LABEL,
        plural="configurationrules",
        short_names=("cfconfigrule",),
        columns=rule_columns(),
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
        rank=200,
        permissions=(Permission("Zone · Origin Rules · Edit", "to write its rule in the zone's origin phase"),),
        claim_label=RULE_ID_LABEL,
        plural="originrules",
        short_names=("cforigin",),
        columns=rule_columns(PrinterColumn("Port", ".spec.origin.port", type="integer")),
        immutable=("zoneRef",),
    )
