"""What Cloudflare refuses in a zone's rule: the phase's actions, the plan's limits, and the lists it names."""

from __future__ import annotations

import re

from app.emulator.envelope import CloudflareError, error
from app.emulator.kinds.lists import lists_named
from app.emulator.kinds.zones import plan_of
from app.emulator.state import Obj, Store

PHASES = (
    "ddos_l4",
    "ddos_l7",
    "http_config_settings",
    "http_custom_errors",
    "http_log_custom_fields",
    "http_ratelimit",
    "http_request_cache_settings",
    "http_request_dynamic_redirect",
    "http_request_firewall_custom",
    "http_request_firewall_managed",
    "http_request_late_transform",
    "http_request_origin",
    "http_request_redirect",
    "http_request_sanitize",
    "http_request_sbfm",
    "http_request_transform",
    "http_response_cache_settings",
    "http_response_compression",
    "http_response_firewall_managed",
    "http_response_headers_transform",
    "magic_transit",
    "magic_transit_ids_managed",
    "magic_transit_managed",
    "magic_transit_ratelimit",
)
MANAGED_PHASE = "http_request_firewall_managed"
FREE_MANAGED = "77454fe2d30c4220b5701f6fdfb893ba"
# ID -> (name, the cheapest plan that may deploy it)
MANAGED: dict[str, tuple[str, str]] = {
    FREE_MANAGED: ("Cloudflare Free Managed Ruleset", "free"),
    "efb7b8c949ac4650a09736fc376e9aee": ("Cloudflare Managed Ruleset", "pro"),
    "4814384a9e5d4991b9815dcfc25d2f1f": ("Cloudflare OWASP Core Ruleset", "pro"),
}


PLAN_RANK = {"free": 0, "pro": 1, "business": 2, "enterprise": 3}
_CHALLENGES = ("challenge", "js_challenge", "managed_challenge")
ACTIONS: dict[str, tuple[str, ...]] = {
    "http_request_firewall_custom": ("block", *_CHALLENGES, "skip", "log"),
    "http_ratelimit": ("block", *_CHALLENGES, "log"),
    MANAGED_PHASE: ("execute", "skip"),
    "http_request_transform": ("rewrite",),
    "http_request_late_transform": ("rewrite",),
    "http_response_headers_transform": ("rewrite",),
    "http_request_dynamic_redirect": ("redirect",),
    "http_request_cache_settings": ("set_cache_settings",),
    "http_config_settings": ("set_config",),
    "http_request_origin": ("route",),
}
COUNT_GROUP = {
    "http_request_firewall_custom": "custom",
    "http_ratelimit": "ratelimit",
    "http_request_transform": "transform",
    "http_request_late_transform": "transform",
    "http_response_headers_transform": "transform",
}
RULE_COUNTS = {
    "free": {"custom": 5, "ratelimit": 1, "other": 10},
    "pro": {"custom": 20, "ratelimit": 2, "other": 25},
    "business": {"custom": 100, "ratelimit": 5, "other": 50},
    "enterprise": {"custom": 1000, "ratelimit": 100, "other": 300},
}
_NO_REGEX_ON_FREE = frozenset(
    {
        "http_request_firewall_custom",
        "http_request_transform",
        "http_request_late_transform",
        "http_response_headers_transform",
        "http_request_dynamic_redirect",
    }
)
_REGEX = re.compile(r"\bmatches\b|\s~\s|\bregex_replace\s*\(")


def refused(message: str, pointer: str | None = None) -> CloudflareError:
    return CloudflareError(400, [error(20021, message, pointer=pointer)])


def zone_plan(zone: Obj) -> str:
    return str(plan_of(zone))


def check_rule(zone: Obj, phase: str, rule: Obj) -> None:
    """Refuse what the phase or the zone's plan does not allow in one rule."""
    plan = zone_plan(zone)
    action, expression = rule.get("action"), rule.get("expression")
    if not action:
        raise refused("action is required", "/action")
    if not isinstance(expression, str) or not expression.strip():
        raise refused("expression is required", "/expression")
    if len(expression) > 4096:
        raise refused("expression exceeds the maximum length of 4096 characters", "/expression")
    allowed = ACTIONS.get(phase)
    if allowed is not None and action not in allowed:
        raise refused(f"'{action}' is not a valid action for the {phase} phase", "/action")
    if action == "log" and plan != "enterprise":
        raise refused("the log action is only available on Enterprise plans", "/action")
    parameters: Obj = rule.get("action_parameters") or {}
    if plan == "free" and phase in _NO_REGEX_ON_FREE:
        texts = [expression, *(_strings(parameters))]
        if any(_REGEX.search(text) for text in texts):
            raise refused("regular expressions are not available on the Free plan", "/expression")
    if phase == "http_ratelimit":
        _check_ratelimit(plan, rule)
    if phase == MANAGED_PHASE and action == "execute":
        target = parameters.get("id")
        offered = MANAGED.get(str(target))
        if offered is None or PLAN_RANK[plan] < PLAN_RANK[offered[1]]:
            raise refused(f"managed ruleset {target!r} is not available to this zone", "/action_parameters/id")
    if phase == "http_config_settings" and plan == "free":
        if parameters.get("polish", "off") != "off":
            raise refused("polish is not available on the Free plan", "/action_parameters/polish")
        if parameters.get("ssl") == "origin_pull" or parameters.get("security_level") == "off":
            raise refused("this setting is not available on the Free plan", "/action_parameters")
    if phase == "http_request_cache_settings" and "vary" in parameters:
        _check_vary(parameters["vary"])
    if phase == "http_request_dynamic_redirect" and "from_value" in parameters:
        _check_from_value(parameters["from_value"])
    if phase == "http_request_origin" and plan != "enterprise":
        origin = parameters.get("origin") or {}
        if set(parameters) - {"origin"} or set(origin) - {"port"}:
            raise refused("only the destination port can be overridden on this plan", "/action_parameters")


_REDIRECT_CODES = (301, 302, 303, 307, 308)


def _check_from_value(from_value: object) -> None:
    """Cloudflare's shape of a single redirect's `from_value`: a `target_url` with a value or an expression, and
    beside it, both optional, the `status_code` and `preserve_query_string`."""
    pointer = "/action_parameters/from_value"
    if not isinstance(from_value, dict):
        raise refused("from_value must be an object", pointer)
    target = from_value.get("target_url")
    if not isinstance(target, dict) or not any(isinstance(target.get(k), str) for k in ("value", "expression")):
        raise refused("from_value.target_url needs a value or an expression", f"{pointer}/target_url")
    code = from_value.get("status_code")
    if code is not None and (isinstance(code, bool) or code not in _REDIRECT_CODES):
        codes = ", ".join(map(str, _REDIRECT_CODES))
        raise refused(f"from_value.status_code must be one of {codes}", f"{pointer}/status_code")
    keep = from_value.get("preserve_query_string")
    if keep is not None and not isinstance(keep, bool):
        raise refused("from_value.preserve_query_string must be a boolean", f"{pointer}/preserve_query_string")


_VARY_ACTIONS = ("bypass", "passthrough", "normalize")


def _check_vary(vary: object) -> None:
    """Cloudflare's shape of a cache rule's `vary`: a required `default {action}`, and `headers` keyed by lowercase
    request header, `languages` for accept-language only, `media_types` for accept only."""
    pointer = "/action_parameters/vary"
    if not isinstance(vary, dict) or not isinstance(vary.get("default"), dict):
        raise refused("vary.default is required", f"{pointer}/default")
    if vary["default"].get("action") not in _VARY_ACTIONS:
        raise refused(f"vary.default.action must be one of {', '.join(_VARY_ACTIONS)}", f"{pointer}/default/action")
    headers = vary.get("headers") or {}
    if not isinstance(headers, dict):
        raise refused("vary.headers must be an object keyed by header name", f"{pointer}/headers")
    for name, setting in headers.items():
        where = f"{pointer}/headers/{name}"
        if name != name.lower():
            raise refused(f"vary header {name!r} must be lowercase", where)
        if not isinstance(setting, dict) or setting.get("action") not in _VARY_ACTIONS:
            raise refused(f"vary header {name!r} needs an action", f"{where}/action")
        if "languages" in setting and name != "accept-language":
            raise refused("languages are only valid for the accept-language header", f"{where}/languages")
        if "media_types" in setting and name != "accept":
            raise refused("media_types are only valid for the accept header", f"{where}/media_types")


def check_lists(store: Store, zone: Obj, rule: Obj) -> None:
    """A rule may only name (``$name``) custom lists its zone's account holds."""
    names = lists_named(str(rule.get("expression") or ""))
    if not names:
        return
    held = {lst["name"] for lst in store.table("lists").under(zone["account"]["id"])}
    missing = sorted(names - held)
    if missing:
        raise refused(f"the expression uses the list ${missing[0]}, which the account does not have", "/expression")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _check_ratelimit(plan: str, rule: Obj) -> None:
    ratelimit = rule.get("ratelimit")
    if not isinstance(ratelimit, dict):
        raise refused("ratelimit is required in the http_ratelimit phase", "/ratelimit")
    characteristics = ratelimit.get("characteristics") or []
    if "cf.colo.id" not in characteristics:
        raise refused("ratelimit.characteristics must include cf.colo.id", "/ratelimit/characteristics")
    if not isinstance(ratelimit.get("period"), int):
        raise refused("ratelimit.period is required", "/ratelimit/period")
    if plan == "free":
        free = (
            sorted(characteristics) == ["cf.colo.id", "ip.src"]
            and ratelimit.get("period") == 10
            and ratelimit.get("mitigation_timeout", 10) == 10
            and not ratelimit.get("counting_expression")
            and rule.get("action") == "block"
        )
        if not free:
            raise refused(
                "on the Free plan a rate limiting rule counts by IP (cf.colo.id, ip.src) over 10 seconds, blocks for "
                "10 seconds and has no counting expression",
                "/ratelimit",
            )
