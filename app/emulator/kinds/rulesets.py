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
from collections.abc import Iterable
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from app.emulator.collection import Ctx, Kind, parse_seed
from app.emulator.envelope import JSON, CloudflareError, error, ok, read_json
from app.emulator.ids import new_id, now_iso
from app.emulator.kinds.rule_checks import (
    ACTIONS,
    COUNT_GROUP,
    MANAGED,
    MANAGED_PHASE,
    PHASES,
    PLAN_RANK,
    RULE_COUNTS,
    check_lists,
    check_rule,
    refused,
    zone_plan,
)
from app.emulator.kinds.ruleset_bodies import RulesetInput, RulesetSeed, parse_rule, parse_ruleset, place
from app.emulator.paging import Cursor, SinglePage, bool_param, sort_by
from app.emulator.routes import route
from app.emulator.state import Obj, Store

_MANAGED_SINCE = "2024-01-01T00:00:00.000000Z"
_DEFINITION = ("action", "expression", "description", "enabled", "action_parameters", "ratelimit", "logging", "ref")


def _not_found(what: str) -> CloudflareError:
    return CloudflareError.single(404, 10003, f"could not find {what}")


def _no_entrypoint(phase: str) -> CloudflareError:
    return CloudflareError.single(404, 10003, f"could not find entrypoint ruleset in the {phase} phase")


class Rulesets(Kind):
    name = "rulesets"
    refers_to = ("lists",)
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

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
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
            raise refused("managed rulesets cannot be changed", "/kind")
        return ruleset

    # Writing

    def compose(self, zone: Obj, ruleset: Obj, inputs: list[Obj], store: Store) -> Obj:
        """``ruleset`` with ``inputs`` (stored-shape rules) as its rules, checked and versioned."""
        phase = ruleset["phase"]
        refs = [rule["ref"] for rule in inputs]
        if len(set(refs)) != len(refs):
            raise refused("rule refs must be unique within a ruleset", "/rules")
        ids = [rule["id"] for rule in inputs]
        if len(set(ids)) != len(ids):
            raise refused("rule ids must be unique within a ruleset", "/rules")
        for rule in inputs:
            check_rule(zone, phase, rule)
            check_lists(store, zone, rule)
        if phase == MANAGED_PHASE:
            deployed = [r["action_parameters"]["id"] for r in inputs if r["action"] == "execute"]
            if len(set(deployed)) != len(deployed):
                raise refused("a managed ruleset can be deployed only once per zone", "/rules")
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
        group = COUNT_GROUP.get(phase, "other")
        if group == "transform":
            others = sum(
                len(r["rules"])
                for r in self.siblings(store, zone["id"])
                if COUNT_GROUP.get(r["phase"]) == "transform" and r["id"] != ruleset["id"]
            )
            count += others
        allowed = RULE_COUNTS[zone_plan(zone)]["other" if group == "transform" else group]
        if count > allowed:
            raise CloudflareError.single(
                400, 20216, f"exceeded maximum number of rules in the {phase} phase: {allowed} on this zone's plan"
            )

    def make_rule(self, raw: object, previous: Obj | None, *, keep_version: bool = False) -> Obj:
        body = parse_rule(raw)
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

    def replace_rules(self, ruleset: Obj, raw_rules: Iterable[object]) -> list[Obj]:
        """The rules of a whole-ruleset write, each keeping the ID of the rule it matches by ``id`` or ``ref``."""
        by_id = {rule["id"]: rule for rule in ruleset.get("rules", [])}
        by_ref = {rule["ref"]: rule for rule in ruleset.get("rules", [])}
        rules = []
        for raw in raw_rules:
            if not isinstance(raw, dict):
                raise refused("a rule is an object", "/rules")
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
            raise refused(f"'{phase}' is not a valid phase", "/phase")
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
        body = parse_ruleset(raw)
        current = self.entrypoint(ctx.store, str(ctx.parent_key), phase) or _new_ruleset(body, phase)
        if body.description is not None:
            current = {**current, "description": body.description}
        return self.save(ctx, self.compose(ctx.parent, current, self.replace_rules(current, body.rules), ctx.store))

    async def create_ruleset(self, request: Request) -> Response:
        raw = await read_json(request)
        ctx = await self._ctx(request, "edit")
        assert ctx.parent is not None
        body = parse_ruleset(raw)
        if body.phase not in PHASES:
            raise refused(f"'{body.phase}' is not a valid phase", "/phase")
        if body.kind != "zone":
            raise refused(f"'{body.kind}' is not a valid value for kind", "/kind")
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
        body = parse_ruleset(raw)
        for field in ("name", "kind", "phase"):
            sent = getattr(body, field)
            if sent is not None and sent != current[field]:
                raise refused(f"the {field} of a ruleset cannot change", f"/{field}")
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
        body = parse_rule(raw)
        if body.ref is not None and any(rule["ref"] == body.ref for rule in ruleset["rules"]):
            raise refused(f"a rule with ref {body.ref!r} already exists in this ruleset", "/ref")
        rule = self.make_rule(raw, None)
        rules = place(list(ruleset["rules"]), rule, body.position)
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
        body = parse_rule(raw)
        assert isinstance(raw, dict)  # parse_rule refuses anything but an object
        only_moves = set(raw) <= {"position", "id"}
        rule = previous if only_moves else self.make_rule({**raw, "id": rule_id}, previous)
        if body.ref is not None and any(r["ref"] == body.ref and r["id"] != rule_id for r in ruleset["rules"]):
            raise refused(f"a rule with ref {body.ref!r} already exists in this ruleset", "/ref")
        others = [r for r in ruleset["rules"] if r["id"] != rule_id]
        if body.position is None:
            index = next(i for i, r in enumerate(ruleset["rules"]) if r["id"] == rule_id)
            rules = [*others[:index], rule, *others[index:]]
        else:
            rules = place(others, rule, body.position)
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
            raise refused(f"'{seed.phase}' is not a valid phase", "/phase")
        existing = self.entrypoint(store, str(parent_key), seed.phase)
        if existing is not None and existing["id"] != (seed.id or existing["id"]):
            raise refused(f"zone {parent_key} already has an entry point in {seed.phase}", "/phase")
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
    return PLAN_RANK[zone_plan(zone)] >= PLAN_RANK[since]


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


KIND = Rulesets()
