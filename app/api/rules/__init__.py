"""The rule kinds: each manages one rule in its zone's entry-point ruleset for one phase.

What every rule kind shares is in `common` (`RuleSpec`: `zoneRef`, `expression`, `enabled`, `description`,
`priority`; the status naming the zone, ruleset, rule, ref and version); each kind adds its action and parameters,
named as the deploy guide names them and otherwise as Cloudflare does, camelCased, in the module of its family:
`security` (WAFCustomRule, RateLimitRule, ManagedRuleset), `transform` (TransformRule, RedirectRule), `cache`
(CacheRule), `configuration` (ConfigurationRule, OriginRule). Plan limits (counts, regular expressions on Free,
rate-limit periods) are left to Cloudflare, whose refusal is reported with its message.
"""

from __future__ import annotations

from typing import Final

from app.api.resource import ResourceClass
from app.api.rules.cache import CacheRule
from app.api.rules.configuration import ConfigurationRule, OriginRule
from app.api.rules.security import ManagedRuleset, RateLimitRule, WAFCustomRule
from app.api.rules.transform import RedirectRule, TransformRule

RULE_KINDS: Final[tuple[ResourceClass, ...]] = (
    WAFCustomRule,
    RateLimitRule,
    ManagedRuleset,
    TransformRule,
    RedirectRule,
    CacheRule,
    ConfigurationRule,
    OriginRule,
)
