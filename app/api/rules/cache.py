"""CacheRule: whether and how long Cloudflare caches what a rule matches, and under which key."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field, model_validator

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.resource import Resource
from app.api.rules.common import PHASE_CACHE, RULE_ID_LABEL, RuleSpec, RuleStatus, rule_columns

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
        rank=180,
        permissions=(
            Permission("Zone · Cache Settings · Edit", "to write its rule in the zone's cache-settings phase"),
        ),
        claim_label=RULE_ID_LABEL,
        plural="cacherules",
        short_names=("cfcache",),
        columns=rule_columns(PrinterColumn("Cache", ".spec.cache", type="boolean")),
        immutable=("zoneRef",),
    )
