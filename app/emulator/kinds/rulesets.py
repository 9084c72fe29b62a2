"""Rulesets of a zone: phase entry points, their rules (added, changed, moved and deleted one at a time), versions,
and the managed rulesets Cloudflare offers the zone's plan.

A ruleset: ``{id, name, description, kind, phase, version, last_updated, rules}``; ``version`` is a string that grows
by one with every change, and each version stays readable under ``.../versions/{version}``. A rule: ``{id, ref,
version, action, expression, description, enabled, last_updated, action_parameters?, ratelimit?, logging?}``; ``ref``
defaults to the rule's ID and is unique in its ruleset, and a whole-ruleset PUT keeps the ID of a rule it matches by
``id`` or ``ref``. A rule's own ``version`` moves only when its definition changes, not when it is moved.

Endpoints (zone form only; the account form is not served):

- ``GET``/``PUT /zones/{zone_id}/rulesets/phases/{phase}/entrypoint``: the zone's ruleset for a phase; GET is
  404/10003 "could not find entrypoint ruleset in the <phase> phase" until one exists, PUT creates it or replaces
  its rules; ``.../entrypoint/versions[/{version}]``.
- ``GET``/``POST /zones/{zone_id}/rulesets`` (a second ``kind: "zone"`` ruleset of a phase: 400/20217 with pointer
  ``/kind``, as observed), ``GET``/``PUT``/``DELETE .../rulesets/{id}`` (DELETE answers 204),
  ``.../rulesets/{id}/versions[/{version}]``.
- ``POST .../rulesets/{id}/rules`` (appended unless ``position``), ``PATCH``/``DELETE .../rules/{rule_id}``: each
  answers the whole ruleset. ``position`` is one of ``{"before": id}`` (``""``: first), ``{"after": id}`` (``""``:
  last) or ``{"index": n}`` (1-based); a PATCH of nothing but ``position`` moves the rule. A PATCH otherwise carries
  the complete rule, as Cloudflare asks.
- Writes take ``dry_run=true``: checked, not kept, answered with ``result: null``.

Listing ``/zones/{zone_id}/rulesets`` pages with a cursor and shows, beside the zone's own rulesets, the managed
rulesets its plan may deploy (``kind: "managed"``): the Cloudflare Free Managed Ruleset on every plan, the Cloudflare
Managed Ruleset and the OWASP Core Ruleset from Pro. Cloudflare applies the Free Managed Ruleset to a zone that has no
entry point of its own in ``http_request_firewall_managed``, so that entry point is 404 until the zone deploys
something there; deleting it hands the zone back to that default. An ``execute`` rule must name a managed ruleset the
plan offers, at most once per zone; its ``action_parameters`` answer with ``version: "latest"``.

Checks per phase (the ten kflare writes; other phases take any rule): the phase's actions; ``http_ratelimit`` needs
``ratelimit.characteristics`` with ``cf.colo.id`` and a period, and on Free exactly ``["cf.colo.id", "ip.src"]``, a
period and mitigation timeout of 10 s, no counting expression and ``block``; on Free, no regular expressions
(``matches``, ``~``, ``regex_replace``) in custom, transform and redirect rules; configuration rules refuse
``polish`` other than ``off``, ``ssl: origin_pull`` and ``security_level: off``; origin rules override the port only;
a redirect's ``from_value`` has a ``target_url`` (value or expression) and, kept and answered as sent, an optional
``status_code`` (301, 302, 303, 307 or 308) and ``preserve_query_string``.
Rule counts per plan (Free): custom 5, rate limiting 1, the three transform phases 10 together, redirects, cache,
configuration and origin rules 10 each. Expressions are at most 4,096 characters and may name (``$name``) only custom
lists the zone's account holds.

Unverified: every code but 10003 and 20217 (rule refused: 400/20021; over the plan's count: 400/20216; ruleset or rule
not found: 404/10003), the counts on paid plans (Pro 20/2/25, Business 100/5/50, Enterprise 1000/100/300 for custom,
rate limiting and the rest), whether a PUT that changes nothing still adds a version (it does here).

State-file entries: ``{zone_id, phase, rules, name?, description?, kind?, id?, version?, last_updated?, history?}``,
rules as the API takes them plus their ``id``, ``version`` and ``last_updated``.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, ValidationError

from app.emulator.collection import Ctx, Cursor, Kind, SinglePage, parse_seed, route
from app.emulator.envelope import JSON, CloudflareError, error, ok, pointer_of, read_json
from app.emulator.ids import new_id, now_iso
from app.emulator.kinds.lists import lists_named
from app.emulator.kinds.zones import plan_of
from app.emulator.paging import bool_param, sort_by
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
_MANAGED_SINCE = "2024-01-01T00:00:00.000000Z"
_RANK = {"free": 0, "pro": 1, "business": 2, "enterprise": 3}
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
_GROUP = {
    "http_request_firewall_custom": "custom",
    "http_ratelimit": "ratelimit",
    "http_request_transform": "transform",
    "http_request_late_transform": "transform",
    "http_response_headers_transform": "transform",
}
_COUNTS = {
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
_DEFINITION = ("action", "expression", "description", "enabled", "action_parameters", "ratelimit", "logging", "ref")


def _refused(message: str, pointer: str | None = None) -> CloudflareError:
    return CloudflareError(400, [error(20021, message, pointer=pointer)])


def _not_found(what: str) -> CloudflareError:
    return CloudflareError.single(404, 10003, f"could not find {what}")


def _no_entrypoint(phase: str) -> CloudflareError:
    return CloudflareError.single(404, 10003, f"could not find entrypoint ruleset in the {phase} phase")


class RuleInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    ref: str | None = None
    action: str | None = None
    expression: str | None = None
    description: str = ""
    enabled: bool = True
    action_parameters: dict[str, Any] | None = None
    ratelimit: dict[str, Any] | None = None
    logging: dict[str, Any] | None = None
    position: dict[str, Any] | None = None


class RulesetInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = None
    description: str | None = None
    kind: Literal["managed", "custom", "root", "zone"] | None = None
    phase: str | None = None
    rules: list[dict[str, Any]] = []


class RulesetSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    zone_id: str | None = None
    id: str | None = None
    name: str = "default"
    description: str = ""
    kind: Literal["zone"] = "zone"
    phase: str
    version: str | None = None
    last_updated: str | None = None
    rules: list[dict[str, Any]] = []
    history: list[dict[str, Any]] | None = None


def _parse_rule(raw: Any) -> RuleInput:
    try:
        return RuleInput.model_validate(raw)
    except ValidationError as exc:
        message, pointer = pointer_of(exc)
        raise _refused(message, pointer) from None


def _plan(zone: Obj) -> str:
    return str(plan_of(zone))


def _check_rule(zone: Obj, phase: str, rule: Obj) -> None:
    """Refuse what the phase or the zone's plan does not allow in one rule."""
    plan = _plan(zone)
    action, expression = rule.get("action"), rule.get("expression")
    if not action:
        raise _refused("action is required", "/action")
    if not isinstance(expression, str) or not expression.strip():
        raise _refused("expression is required", "/expression")
    if len(expression) > 4096:
        raise _refused("expression exceeds the maximum length of 4096 characters", "/expression")
    allowed = ACTIONS.get(phase)
    if allowed is not None and action not in allowed:
        raise _refused(f"'{action}' is not a valid action for the {phase} phase", "/action")
    if action == "log" and plan != "enterprise":
        raise _refused("the log action is only available on Enterprise plans", "/action")
    parameters: Obj = rule.get("action_parameters") or {}
    if plan == "free" and phase in _NO_REGEX_ON_FREE:
        texts = [expression, *(_strings(parameters))]
        if any(_REGEX.search(text) for text in texts):
            raise _refused("regular expressions are not available on the Free plan", "/expression")
    if phase == "http_ratelimit":
        _check_ratelimit(plan, rule)
    if phase == MANAGED_PHASE and action == "execute":
        target = parameters.get("id")
        offered = MANAGED.get(str(target))
        if offered is None or _RANK[plan] < _RANK[offered[1]]:
            raise _refused(f"managed ruleset {target!r} is not available to this zone", "/action_parameters/id")
    if phase == "http_config_settings" and plan == "free":
        if parameters.get("polish", "off") != "off":
            raise _refused("polish is not available on the Free plan", "/action_parameters/polish")
        if parameters.get("ssl") == "origin_pull" or parameters.get("security_level") == "off":
            raise _refused("this setting is not available on the Free plan", "/action_parameters")
    if phase == "http_request_cache_settings" and "vary" in parameters:
        _check_vary(parameters["vary"])
    if phase == "http_request_dynamic_redirect" and "from_value" in parameters:
        _check_from_value(parameters["from_value"])
    if phase == "http_request_origin" and plan != "enterprise":
        origin = parameters.get("origin") or {}
        if set(parameters) - {"origin"} or set(origin) - {"port"}:
            raise _refused("only the destination port can be overridden on this plan", "/action_parameters")


_REDIRECT_CODES = (301, 302, 303, 307, 308)


def _check_from_value(from_value: Any) -> None:
    """Cloudflare's shape of a single redirect's `from_value`: a `target_url` with a value or an expression, and
    beside it, both optional, the `status_code` and `preserve_query_string`."""
    pointer = "/action_parameters/from_value"
    if not isinstance(from_value, dict):
        raise _refused("from_value must be an object", pointer)
    target = from_value.get("target_url")
    if not isinstance(target, dict) or not any(isinstance(target.get(k), str) for k in ("value", "expression")):
        raise _refused("from_value.target_url needs a value or an expression", f"{pointer}/target_url")
    code = from_value.get("status_code")
    if code is not None and (isinstance(code, bool) or code not in _REDIRECT_CODES):
        codes = ", ".join(map(str, _REDIRECT_CODES))
        raise _refused(f"from_value.status_code must be one of {codes}", f"{pointer}/status_code")
    keep = from_value.get("preserve_query_string")
    if keep is not None and not isinstance(keep, bool):
        raise _refused("from_value.preserve_query_string must be a boolean", f"{pointer}/preserve_query_string")


_VARY_ACTIONS = ("bypass", "passthrough", "normalize")


def _check_vary(vary: Any) -> None:
    """Cloudflare's shape of a cache rule's `vary`: a required `default {action}`, and `headers` keyed by lowercase
    request header, `languages` for accept-language only, `media_types` for accept only."""
    pointer = "/action_parameters/vary"
    if not isinstance(vary, dict) or not isinstance(vary.get("default"), dict):
        raise _refused("vary.default is required", f"{pointer}/default")
    if vary["default"].get("action") not in _VARY_ACTIONS:
        raise _refused(f"vary.default.action must be one of {', '.join(_VARY_ACTIONS)}", f"{pointer}/default/action")
    headers = vary.get("headers") or {}
    if not isinstance(headers, dict):
        raise _refused("vary.headers must be an object keyed by header name", f"{pointer}/headers")
    for name, setting in headers.items():
        where = f"{pointer}/headers/{name}"
        if name != name.lower():
            raise _refused(f"vary header {name!r} must be lowercase", where)
        if not isinstance(setting, dict) or setting.get("action") not in _VARY_ACTIONS:
            raise _refused(f"vary header {name!r} needs an action", f"{where}/action")
        if "languages" in setting and name != "accept-language":
            raise _refused("languages are only valid for the accept-language header", f"{where}/languages")
        if "media_types" in setting and name != "accept":
            raise _refused("media_types are only valid for the accept header", f"{where}/media_types")


def _check_lists(store: Store, zone: Obj, rule: Obj) -> None:
    """A rule may only name (``$name``) custom lists its zone's account holds."""
    names = lists_named(str(rule.get("expression") or ""))
    if not names:
        return
    held = {lst["name"] for lst in store.table("lists").under(zone["account"]["id"])}
    missing = sorted(names - held)
    if missing:
        raise _refused(f"the expression uses the list ${missing[0]}, which the account does not have", "/expression")


def _strings(value: Any) -> list[str]:
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
        raise _refused("ratelimit is required in the http_ratelimit phase", "/ratelimit")
    characteristics = ratelimit.get("characteristics") or []
    if "cf.colo.id" not in characteristics:
        raise _refused("ratelimit.characteristics must include cf.colo.id", "/ratelimit/characteristics")
    if not isinstance(ratelimit.get("period"), int):
        raise _refused("ratelimit.period is required", "/ratelimit/period")
    if plan == "free":
        free = (
            sorted(characteristics) == ["cf.colo.id", "ip.src"]
            and ratelimit.get("period") == 10
            and ratelimit.get("mitigation_timeout", 10) == 10
            and not ratelimit.get("counting_expression")
            and rule.get("action") == "block"
        )
        if not free:
            raise _refused(
                "on the Free plan a rate limiting rule counts by IP (cf.colo.id, ip.src) over 10 seconds, blocks for "
                "10 seconds and has no counting expression",
                "/ratelimit",
            )


class Rulesets(Kind):
    name = "rulesets"
    parent = "zones"
    parent_field = "zone_id"
    path = "/zones/{zone_id}/rulesets"
    scope_param = "zone_id"
    item_param = "ruleset_id"
    resource = "rulesets"
    verbs = frozenset({"list", "get"})
    paging = Cursor(default=50, minimum=1, maximum=1000)
    hidden = ("history",)
    stamps = ("last_updated",)
    summary_fields = ("phase", "version")

    def not_found(self) -> CloudflareError:
        return _not_found("ruleset")

    # Lookups

    def rows(self, ctx: Ctx) -> list[Obj]:
        assert ctx.parent is not None
        own = self.siblings(ctx.store, ctx.parent_key)
        return [*own, *(_managed(rid) for rid, (_n, since) in MANAGED.items() if _offered(ctx.parent, since))]

    def order(self, ctx: Ctx, items: Any) -> list[Obj]:
        return sort_by(items, lambda r: (r["kind"] != "zone", r["phase"], r["id"]), "asc")

    def render(self, ctx: Ctx, obj: Obj) -> Obj:
        # The listing shows rulesets without their rules; reading one shows them (`get` below).
        return {key: copy.deepcopy(value) for key, value in obj.items() if key not in ("history", "rules")}

    async def get(self, request: Request) -> JSONResponse:
        # ``GET .../rulesets/{id}`` answers the ruleset with its ``rules``, as the entry point does: Cloudflare's
        # OpenAPI document (``rulesets_ruleset-response``) requires them and the SDK's ``RulesetGetResponse`` reads
        # them.
        _ctx, ruleset = await self._found(request, "read")
        return ok(self.full(ruleset))

    def full(self, ruleset: Obj) -> Obj:
        return {key: copy.deepcopy(value) for key, value in ruleset.items() if key != "history"}

    def reach(self, ctx: Ctx, ident: str) -> Obj:
        assert ctx.parent is not None
        if ident in MANAGED and _offered(ctx.parent, MANAGED[ident][1]):
            return _managed(ident)
        return super().reach(ctx, ident)

    def entrypoint(self, store: Store, zone_id: str, phase: str) -> Obj | None:
        return next(
            (r for r in self.siblings(store, zone_id) if r["phase"] == phase and r["kind"] == "zone"),
            None,
        )

    def _own(self, ctx: Ctx, ident: str) -> Obj:
        ruleset = self.reach(ctx, ident)
        if ruleset["kind"] == "managed":
            raise _refused("managed rulesets cannot be changed", "/kind")
        return ruleset

    # Writing

    def compose(self, zone: Obj, ruleset: Obj, inputs: list[Obj], store: Store) -> Obj:
        """``ruleset`` with ``inputs`` (stored-shape rules) as its rules, checked and versioned."""
        phase = ruleset["phase"]
        refs = [rule["ref"] for rule in inputs]
        if len(set(refs)) != len(refs):
            raise _refused("rule refs must be unique within a ruleset", "/rules")
        ids = [rule["id"] for rule in inputs]
        if len(set(ids)) != len(ids):
            raise _refused("rule ids must be unique within a ruleset", "/rules")
        for rule in inputs:
            _check_rule(zone, phase, rule)
            _check_lists(store, zone, rule)
        if phase == MANAGED_PHASE:
            deployed = [r["action_parameters"]["id"] for r in inputs if r["action"] == "execute"]
            if len(set(deployed)) != len(deployed):
                raise _refused("a managed ruleset can be deployed only once per zone", "/rules")
        self._check_count(store, zone, ruleset, len(inputs))
        now = now_iso()
        version = str(int(ruleset.get("version") or "0") + 1)
        updated = {**ruleset, "rules": inputs, "version": version, "last_updated": now}
        updated["history"] = [*ruleset.get("history", []), self.full(updated)]
        return updated

    def _check_count(self, store: Store, zone: Obj, ruleset: Obj, count: int) -> None:
        phase = ruleset["phase"]
        if phase not in ACTIONS or phase == MANAGED_PHASE:
            return
        group = _GROUP.get(phase, "other")
        if group == "transform":
            others = sum(
                len(r["rules"])
                for r in self.siblings(store, zone["id"])
                if _GROUP.get(r["phase"]) == "transform" and r["id"] != ruleset["id"]
            )
            count += others
        allowed = _COUNTS[_plan(zone)]["other" if group == "transform" else group]
        if count > allowed:
            raise CloudflareError.single(
                400, 20216, f"exceeded maximum number of rules in the {phase} phase: {allowed} on this zone's plan"
            )

    def make_rule(self, raw: Any, previous: Obj | None, *, keep_version: bool = False) -> Obj:
        body = _parse_rule(raw)
        rule_id = previous["id"] if previous is not None else (body.id or new_id())
        rule: Obj = {
            "id": rule_id,
            "ref": body.ref or (previous["ref"] if previous is not None else rule_id),
            "action": body.action,
            "expression": body.expression,
            "description": body.description,
            "enabled": body.enabled,
        }
        for optional in ("action_parameters", "ratelimit", "logging"):
            value = getattr(body, optional)
            if value is not None:
                rule[optional] = copy.deepcopy(value)
        if body.action == "execute" and isinstance(rule.get("action_parameters"), dict):
            rule["action_parameters"].setdefault("version", "latest")
        unchanged = previous is not None and all(previous.get(k) == rule.get(k) for k in _DEFINITION)
        if previous is not None and (unchanged or keep_version):
            rule["version"], rule["last_updated"] = previous["version"], previous["last_updated"]
        else:
            rule["version"] = str(int(previous["version"]) + 1) if previous is not None else "1"
            rule["last_updated"] = now_iso()
        return rule

    def replace_rules(self, ruleset: Obj, raw_rules: list[Any]) -> list[Obj]:
        """The rules of a whole-ruleset write, each keeping the ID of the rule it matches by ``id`` or ``ref``."""
        by_id = {rule["id"]: rule for rule in ruleset.get("rules", [])}
        by_ref = {rule["ref"]: rule for rule in ruleset.get("rules", [])}
        rules = []
        for raw in raw_rules:
            if not isinstance(raw, dict):
                raise _refused("a rule is an object", "/rules")
            previous = by_id.get(str(raw.get("id"))) or by_ref.get(str(raw.get("ref")))
            rules.append(self.make_rule(raw, previous))
        return rules

    def save(self, ctx: Ctx, ruleset: Obj) -> Response:
        """Keep ``ruleset`` (unless a dry run) and answer it whole."""
        if bool_param(ctx.query, "dry_run"):
            return ok(None)
        self.table(ctx.store).add(ruleset, ctx.parent_key)
        return ok(self.full(ruleset))

    # Endpoints

    def extra_routes(self, router: APIRouter) -> None:
        entry = "/zones/{zone_id}/rulesets/phases/{ruleset_phase}/entrypoint"
        item = self.item_path()
        route(router, "GET", entry, "rulesets_entrypoint_get", self.get_entrypoint)
        route(router, "PUT", entry, "rulesets_entrypoint_put", self.put_entrypoint)
        route(router, "GET", f"{entry}/versions", "rulesets_entrypoint_versions", self.entrypoint_versions)
        route(
            router,
            "GET",
            f"{entry}/versions/{{ruleset_version}}",
            "rulesets_entrypoint_version",
            self.entrypoint_version,
        )
        route(router, "POST", self.path, "rulesets_create", self.create_ruleset)
        route(router, "PUT", item, "rulesets_update", self.update_ruleset)
        route(router, "DELETE", item, "rulesets_delete", self.delete_ruleset, status_code=204, response_class=Response)
        route(router, "GET", f"{item}/versions", "rulesets_versions", self.versions)
        route(router, "GET", f"{item}/versions/{{ruleset_version}}", "rulesets_version", self.version)
        route(router, "POST", f"{item}/rules", "rulesets_rule_create", self.create_rule)
        route(router, "PATCH", f"{item}/rules/{{rule_id}}", "rulesets_rule_edit", self.edit_rule)
        route(router, "DELETE", f"{item}/rules/{{rule_id}}", "rulesets_rule_delete", self.delete_rule)

    async def _ctx(self, request: Request, level: Literal["read", "edit"]) -> Ctx:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, level)
        return ctx

    def _phase(self, ctx: Ctx) -> str:
        phase = ctx.param("ruleset_phase")
        if phase not in PHASES:
            raise _refused(f"'{phase}' is not a valid phase", "/phase")
        return phase

    async def get_entrypoint(self, request: Request) -> JSONResponse:
        ctx = await self._ctx(request, "read")
        phase = self._phase(ctx)
        ruleset = self.entrypoint(ctx.store, str(ctx.parent_key), phase)
        if ruleset is None:
            raise _no_entrypoint(phase)
        return ok(self.full(ruleset))

    async def put_entrypoint(self, request: Request) -> Response:
        raw = await read_json(request)
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        phase = self._phase(ctx)
        body = _parse_body(raw)
        current = self.entrypoint(ctx.store, str(ctx.parent_key), phase) or _new_ruleset(body, phase)
        if body.description is not None:
            current = {**current, "description": body.description}
        return self.save(ctx, self.compose(ctx.parent, current, self.replace_rules(current, body.rules), ctx.store))

    async def create_ruleset(self, request: Request) -> Response:
        raw = await read_json(request)
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        body = _parse_body(raw)
        if body.phase not in PHASES:
            raise _refused(f"'{body.phase}' is not a valid phase", "/phase")
        if body.kind != "zone":
            raise _refused(f"'{body.kind}' is not a valid value for kind", "/kind")
        if self.entrypoint(ctx.store, str(ctx.parent_key), body.phase) is not None:
            raise CloudflareError(
                400,
                [
                    error(
                        20217,
                        "'zone' is not a valid value for kind because exceeded maximum number of zone rulesets for "
                        f"phase {body.phase}",
                        pointer="/kind",
                    )
                ],
            )
        fresh = _new_ruleset(body, body.phase)
        return self.save(ctx, self.compose(ctx.parent, fresh, self.replace_rules(fresh, body.rules), ctx.store))

    async def update_ruleset(self, request: Request) -> Response:
        raw = await read_json(request)
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        current = self._own(ctx, ctx.param("ruleset_id"))
        body = _parse_body(raw)
        for field in ("name", "kind", "phase"):
            sent = getattr(body, field)
            if sent is not None and sent != current[field]:
                raise _refused(f"the {field} of a ruleset cannot change", f"/{field}")
        if body.description is not None:
            current = {**current, "description": body.description}
        return self.save(ctx, self.compose(ctx.parent, current, self.replace_rules(current, body.rules), ctx.store))

    async def delete_ruleset(self, request: Request) -> Response:
        ctx = await self._ctx(request, "edit")
        ruleset = self._own(ctx, ctx.param("ruleset_id"))
        self.table(ctx.store).remove(ruleset["id"])
        return Response(status_code=204)

    async def create_rule(self, request: Request) -> Response:
        raw = await read_json(request)
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        ruleset = self._own(ctx, ctx.param("ruleset_id"))
        body = _parse_rule(raw)
        if body.ref is not None and any(rule["ref"] == body.ref for rule in ruleset["rules"]):
            raise _refused(f"a rule with ref {body.ref!r} already exists in this ruleset", "/ref")
        rule = self.make_rule(raw, None)
        rules = _place(list(ruleset["rules"]), rule, body.position)
        return self.save(ctx, self.compose(ctx.parent, ruleset, rules, ctx.store))

    async def edit_rule(self, request: Request) -> Response:
        raw = await read_json(request)
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        ruleset = self._own(ctx, ctx.param("ruleset_id"))
        rule_id = ctx.param("rule_id")
        previous = next((rule for rule in ruleset["rules"] if rule["id"] == rule_id), None)
        if previous is None:
            raise _not_found("rule")
        body = _parse_rule(raw)
        only_moves = isinstance(raw, dict) and set(raw) <= {"position", "id"}
        rule = previous if only_moves else self.make_rule({**raw, "id": rule_id}, previous)
        if body.ref is not None and any(r["ref"] == body.ref and r["id"] != rule_id for r in ruleset["rules"]):
            raise _refused(f"a rule with ref {body.ref!r} already exists in this ruleset", "/ref")
        others = [r for r in ruleset["rules"] if r["id"] != rule_id]
        if body.position is None:
            index = next(i for i, r in enumerate(ruleset["rules"]) if r["id"] == rule_id)
            rules = [*others[:index], rule, *others[index:]]
        else:
            rules = _place(others, rule, body.position)
        return self.save(ctx, self.compose(ctx.parent, ruleset, rules, ctx.store))

    async def delete_rule(self, request: Request) -> Response:
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        ruleset = self._own(ctx, ctx.param("ruleset_id"))
        rule_id = ctx.param("rule_id")
        if not any(rule["id"] == rule_id for rule in ruleset["rules"]):
            raise _not_found("rule")
        rules = [rule for rule in ruleset["rules"] if rule["id"] != rule_id]
        return self.save(ctx, self.compose(ctx.parent, ruleset, rules, ctx.store))

    def _versions_of(self, ruleset: Obj) -> list[Obj]:
        history = ruleset.get("history") or [self.full(ruleset)]
        return [{k: v for k, v in snapshot.items() if k != "rules"} for snapshot in reversed(history)]

    def _version_of(self, ruleset: Obj, version: str) -> Obj:
        history = ruleset.get("history") or [self.full(ruleset)]
        found = next((snapshot for snapshot in history if snapshot["version"] == version), None)
        if found is None:
            raise _not_found(f"version {version} of the ruleset")
        return copy.deepcopy(found)

    async def versions(self, request: Request) -> JSONResponse:
        ctx = await self._ctx(request, "read")
        return SinglePage().respond(self._versions_of(self.reach(ctx, ctx.param("ruleset_id"))), ctx.query, dict)

    async def version(self, request: Request) -> JSONResponse:
        ctx = await self._ctx(request, "read")
        ruleset = self.reach(ctx, ctx.param("ruleset_id"))
        return ok(self._version_of(ruleset, ctx.param("ruleset_version")))

    async def entrypoint_versions(self, request: Request) -> JSONResponse:
        ctx = await self._ctx(request, "read")
        phase = self._phase(ctx)
        ruleset = self.entrypoint(ctx.store, str(ctx.parent_key), phase)
        if ruleset is None:
            raise _no_entrypoint(phase)
        return SinglePage().respond(self._versions_of(ruleset), ctx.query, dict)

    async def entrypoint_version(self, request: Request) -> JSONResponse:
        ctx = await self._ctx(request, "read")
        phase = self._phase(ctx)
        ruleset = self.entrypoint(ctx.store, str(ctx.parent_key), phase)
        if ruleset is None:
            raise _no_entrypoint(phase)
        return ok(self._version_of(ruleset, ctx.param("ruleset_version")))

    # State file

    def seed(self, store: Store, entry: JSON, parent: Obj | None, parent_key: str | None, where: str) -> Obj:
        seed = parse_seed(RulesetSeed, entry, where)
        assert parent is not None
        if seed.phase not in PHASES:
            raise _refused(f"'{seed.phase}' is not a valid phase", "/phase")
        existing = self.entrypoint(store, str(parent_key), seed.phase)
        if existing is not None and existing["id"] != (seed.id or existing["id"]):
            raise _refused(f"zone {parent_key} already has an entry point in {seed.phase}", "/phase")
        fresh = _new_ruleset(RulesetInput(name=seed.name, description=seed.description), seed.phase)
        if seed.id is not None:
            fresh["id"] = seed.id
        rules = []
        for raw in seed.rules:
            rule = self.make_rule(raw, None)
            for stamp in ("version", "last_updated"):
                if raw.get(stamp) is not None:
                    rule[stamp] = raw[stamp]
            rules.append(rule)
        ruleset = self.compose(parent, fresh, rules, store)
        for stamp in ("version", "last_updated"):
            value = getattr(seed, stamp)
            if value is not None:
                ruleset[stamp] = value
        if seed.history is not None:
            ruleset["history"] = seed.history
        return self.table(store).add(ruleset, parent_key)


def _parse_body(raw: Any) -> RulesetInput:
    try:
        return RulesetInput.model_validate(raw)
    except ValidationError as exc:
        message, pointer = pointer_of(exc)
        raise _refused(message, pointer) from None


def _new_ruleset(body: RulesetInput, phase: str) -> Obj:
    return {
        "id": new_id(),
        "name": body.name or "default",
        "description": body.description or "",
        "kind": "zone",
        "phase": phase,
        "version": "0",
        "last_updated": now_iso(),
        "rules": [],
        "history": [],
    }


def _offered(zone: Obj, since: str) -> bool:
    return _RANK[_plan(zone)] >= _RANK[since]


def _managed(ruleset_id: str) -> Obj:
    name, _since = MANAGED[ruleset_id]
    return {
        "id": ruleset_id,
        "name": name,
        "description": f"{name}, maintained by Cloudflare",
        "kind": "managed",
        "phase": MANAGED_PHASE,
        "version": "1",
        "last_updated": _MANAGED_SINCE,
        "rules": [],
    }


def _place(rules: list[Obj], rule: Obj, position: dict[str, Any] | None) -> list[Obj]:
    """``rule`` put among ``rules`` where ``position`` says (the end without one)."""
    if not position:
        return [*rules, rule]
    if len(position) != 1:
        raise _refused("position takes exactly one of before, after and index", "/position")
    ((where, value),) = position.items()
    ids = [r["id"] for r in rules]
    if where == "index":
        if not isinstance(value, int) or value < 1:
            raise _refused("position.index is a number from 1", "/position/index")
        index = min(value - 1, len(rules))
    elif where in ("before", "after") and isinstance(value, str):
        if value == "":
            index = 0 if where == "before" else len(rules)
        elif value in ids:
            index = ids.index(value) + (1 if where == "after" else 0)
        else:
            raise _refused(f"position.{where} names no rule of this ruleset", f"/position/{where}")
    else:
        raise _refused("position takes before, after or index", "/position")
    return [*rules[:index], rule, *rules[index:]]


KIND = Rulesets()
