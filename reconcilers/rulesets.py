"""The ruleset engine: one rule per resource in its zone's entry-point ruleset of one phase, for every rule kind.

A rule kind supplies only its action and parameters (`RuleKind.action`, `parameters`, `extras`); everything else is
here, written once:

- Ownership by `ref`. A rule carries a ref derived from its resource's kind, namespace and name (`ref_for`), so a
  rebuilt cluster finds its rules, and finding a rule by its ref is recovery, never adoption. A rule without one of
  kflare's refs is never changed, moved or deleted, and no rule is ever adopted: the adoption policy does not apply.
- Order. kflare's rules of a phase (every kind writing to it, every namespace) are kept in `spec.priority` order,
  ties by namespace and name; other rules keep their place. A new rule is placed next to its neighbour in that
  order; rules out of order are moved one at a time with `position`, as few as possible (those outside the longest
  run already in order), and only ever next to another kflare rule.
- Rule-level writes. An entry point that does not exist is created empty (POST, which fails rather than replace one
  made meanwhile); the ruleset is never written whole, since a PUT could drop a rule added between read and write.
  Rules are added, changed (the complete definition, as Cloudflare asks), moved and deleted one at a time; each
  answer is the whole ruleset, which becomes the shared copy. An idle reconcile writes nothing, so the ruleset's
  version does not move.
- Reads. One shared copy of each (zone, phase) entry point (`reconcilers.collections`), fresh enough for the purpose:
  a drift round reads it once for all its rules, whatever their number and kind.
- Links, through the rule kinds' indexes: the rules of a (zone, phase), which the order is computed from; the lists
  (`$name`) a rule names, as the expression parser finds them, which IPList's deletion waits for and whose
  appearance wakes the rules waiting for them (`IndexLink`).

Writes to one (zone, phase) are serialised in this process, so two rules placed at once see each other.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import JsonValue

from app.api.constants import Reason
from app.api.expressions import PHASES, lists_in
from app.api.resource import Resource
from app.api.rules.common import RuleMetadata, RuleSpec, RuleStatus
from app.cloudflare.calls import JsonBody
from app.cloudflare.client import CloudflareClient
from app.cloudflare.errors import NotFound, Terminal
from app.cloudflare.models import Ruleset, RulesetRule
from app.kube.client import JSON
from app.kube.informer import Indexer
from app.kube.registrations import IndexLink
from reconcilers.capabilities import DriftGrouped, Indexed
from reconcilers.context import ENTRYPOINT, AccountLink, Caches, Credentials, RulesetEngine, lists_key
from reconcilers.credentials import ready_zone, zone_ids, zones_of
from reconcilers.managed_kind import Changes, ManagedKind, pending_intent
from reconcilers.waiting import RETRY_PARENT, NotReady

REF_PREFIX = "kflare-"
LISTS_INDEX = "lists"
"""A rule kind's index of the custom lists its rules name."""
LIST_NAME_INDEX = "list-name"
"""IPList's index of its lists' names, which rules name them by."""
ZONE_PHASE_INDEX = "zone-phase"
"""A rule kind's index of its rules by the Zone they reference and the phase they write to."""
DEFINITION = ("action", "expression", "description", "enabled", "action_parameters", "ratelimit", "logging")

RuleT = TypeVar("RuleT", bound=Resource[Any, RuleStatus])
SpecT = TypeVar("SpecT", bound=RuleSpec)  # the spec of RuleT

RuleBody = dict[str, JsonBody]
"""A rule, or a member of one, as kflare writes it: Cloudflare's names."""


def ref_for(kind: str, namespace: str, name: str) -> str:
    """The ref marking the rule of a resource: stable across clusters, and kflare's mark of ownership."""
    digest = hashlib.sha256(f"{kind}/{namespace}/{name}".encode()).hexdigest()
    return f"{REF_PREFIX}{digest[:32]}"


@dataclass(frozen=True)
class RuleLink:
    account: AccountLink
    zone_id: str
    phase: str

    @property
    def client(self) -> CloudflareClient:
        return self.account.client

    @property
    def collection(self) -> str:
        return collection_key(self.zone_id, self.phase)


def collection_key(zone_id: str, phase: str) -> str:
    return f"rules:{zone_id}:{phase}"


@dataclass(frozen=True)
class ObservedRule:
    rule: RulesetRule
    ruleset: Ruleset

    def described(self) -> str:
        return f"rule {self.rule.id} in the {self.ruleset.phase} phase"


def list_names(expression: str, phase: str) -> frozenset[str]:
    """The custom lists of the account an expression names (`ip.src in $blocked` -> {"blocked"}), as the parser reads
    them: a `$` inside a string names nothing, and Cloudflare's managed lists (`$cf.open_proxies`) are no account's."""
    found = lists_in(expression, phase) if phase in PHASES else lists_in(expression)
    return frozenset(name for name in found if not name.startswith("cf."))


def zone_phase(namespace: str, zone: str, phase: str) -> str:
    """A rule's value in ZONE_PHASE_INDEX."""
    return f"{namespace}/{zone}/{phase}"


def placement(rules: list[RulesetRule], ref: str, keys: dict[str, tuple[int, str, str]]) -> dict[str, str] | None:
    """Where a rule with `ref` goes among `rules` (it not among them): next to its neighbour in kflare's order."""
    mine = keys[ref]
    before = [r for r in rules if r.ref in keys and r.ref != ref and keys[r.ref] < mine]
    after = [r for r in rules if r.ref in keys and r.ref != ref and keys[r.ref] > mine]
    if before:
        return {"after": max(before, key=lambda r: keys[r.ref or ""]).id}
    if after:
        return {"before": min(after, key=lambda r: keys[r.ref or ""]).id}
    return None


def moves(rules: list[RulesetRule], keys: dict[str, tuple[int, str, str]]) -> list[tuple[str, dict[str, str]]]:
    """The fewest moves that put kflare's rules in order (rule ID, position), other rules staying where they are.

    The longest run of kflare's rules already in order stays; each other one goes next to a neighbour in the order
    that is already in place: those before the run's first, nearest first, right before their successor; the others,
    in order, right after their predecessor."""
    own = [r for r in rules if r.ref in keys]
    wanted = sorted(own, key=lambda r: keys[r.ref or ""])
    if [r.id for r in own] == [r.id for r in wanted]:
        return []
    rank = {r.id: i for i, r in enumerate(wanted)}
    staying = _longest_increasing([rank[r.id] for r in own])
    first = min(staying)
    out: list[tuple[str, dict[str, str]]] = []
    for index in range(first - 1, -1, -1):  # before the first one in place, from the nearest outwards
        out.append((wanted[index].id, {"before": wanted[index + 1].id}))
    for index in range(first + 1, len(wanted)):
        if index not in staying:
            out.append((wanted[index].id, {"after": wanted[index - 1].id}))
    return out


def _longest_increasing(values: list[int]) -> set[int]:
    """The values of one longest strictly increasing subsequence."""
    tails: list[int] = []
    tail_index: list[int] = []
    previous = [-1] * len(values)
    for i, value in enumerate(values):
        at = bisect.bisect_left(tails, value)
        if at == len(tails):
            tails.append(value)
            tail_index.append(i)
        else:
            tails[at] = value
            tail_index[at] = i
        previous[i] = tail_index[at - 1] if at > 0 else -1
    out: set[int] = set()
    i = tail_index[-1] if tail_index else -1
    while i >= 0:
        out.add(values[i])
        i = previous[i]
    return out


def _normal(value: JsonBody) -> JsonBody:
    if isinstance(value, dict):
        return _normal_rule(value)
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _normal_rule(rule: Mapping[str, JsonBody]) -> RuleBody:
    """A definition as compared: unset (None) members left out, so an omitted field and a null one are the same."""
    return {k: _normal(v) for k, v in rule.items() if v is not None}


class RuleKind(ManagedKind[RuleT, RuleLink, ObservedRule], Indexed, DriftGrouped, Generic[RuleT, SpecT]):
    """A rule kind: its model, and the action and parameters of its rule. The engine does the rest."""

    key_marks_ownership = True
    status_id = "rule_id"
    observed_id = "rule.id"
    concurrency = 16
    drops_empty_entrypoint: ClassVar[bool] = False
    """Delete the entry point once its last rule is gone (ManagedRuleset: the zone gets Cloudflare's default)."""

    def __init__(self, caches: Caches, credentials: Credentials, rulesets: RulesetEngine) -> None:
        super().__init__(caches, credentials)
        self.engine = rulesets
        self.engine.kinds.add(self.kind)

    # ---- what a kind supplies ----------------------------------------------------------------------------------

    def action(self, spec: SpecT) -> str:
        raise NotImplementedError

    def parameters(self, spec: SpecT) -> RuleBody | None:
        """The rule's `action_parameters`, Cloudflare's names."""
        return None

    def extras(self, spec: SpecT) -> RuleBody:
        """Other members of the rule (`ratelimit`, `logging`)."""
        return {}

    def observed_parameters(self, parameters: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        """Cloudflare's answer as compared (a kind drops what Cloudflare adds on its own)."""
        return parameters

    async def conflict(self, link: RuleLink, obj: RuleT, ruleset: Ruleset | None) -> str | None:
        """Why the rule cannot be written now (another rule already does what it would), or None."""
        return None

    @classmethod
    def phase_of(cls, spec: JSON) -> str:
        """The phase a spec (as JSON) writes to."""
        spec_model = cls.model.spec_model()
        return str(getattr(spec_model, "phase_name", ""))

    # ---- the lifecycle's part ----------------------------------------------------------------------------------

    @classmethod
    def more_indexes(cls) -> dict[str, Indexer]:
        """Beside the claim: the lists a rule names, and its Zone and phase."""

        def lists(raw: JSON) -> list[str]:
            spec = raw.get("spec") or {}
            return sorted(list_names(str(spec.get("expression") or ""), cls.phase_of(spec)))

        def zone_and_phase(raw: JSON) -> list[str]:
            spec = raw.get("spec") or {}
            name = (spec.get("zoneRef") or {}).get("name")
            return [zone_phase(raw["metadata"].get("namespace") or "", name, cls.phase_of(spec))] if name else []

        return {LISTS_INDEX: lists, ZONE_PHASE_INDEX: zone_and_phase}

    @classmethod
    def links(cls) -> Sequence[IndexLink]:
        return (IndexLink("IPList", LISTS_INDEX, LIST_NAME_INDEX),)

    @classmethod
    def drift_group(cls, raw: JSON) -> str | None:
        """Rules are drift-checked per (zone, phase): one read of the entry point serves them all."""
        zone_id = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("zoneID")
        return collection_key(zone_id, cls.phase_of(raw.get("spec") or {})) if zone_id else None

    def open_drift_round(self, group: str) -> None:
        self.engine.rulesets.open_round(group)

    def ref_of(self, obj: RuleT) -> str:
        return ref_for(self.kind, obj.namespace or "", obj.metadata.name)

    def order_keys(self, obj: RuleT, phase: str) -> dict[str, tuple[int, str, str]]:
        """kflare's refs in the entry point of `obj`'s zone and `phase`, and where each goes: (priority, namespace,
        name). Read from the rule kinds' indexes of the rules of each Zone naming that Cloudflare zone."""
        zones = {(obj.namespace or "", obj.spec.zone_ref.name)}
        zone = self.caches.cached("Zone", obj.spec.zone_ref.name, obj.namespace)
        for zone_id in [] if zone is None else zone_ids(zone):
            zones.update(zones_of(self.caches, zone_id))
        keys: dict[str, tuple[int, str, str]] = {}
        for kind_name in sorted(self.engine.kinds):
            informer = self.caches.informer_of(kind_name)
            if informer is None:
                continue
            for namespace, name in sorted(zones):
                for raw in informer.by_index(ZONE_PHASE_INDEX, zone_phase(namespace, name, phase)):
                    meta = raw["metadata"]
                    priority = (raw.get("spec") or {}).get("priority")
                    keys[ref_for(kind_name, namespace, meta["name"])] = (
                        priority if isinstance(priority, int) else 0,
                        namespace,
                        meta["name"],
                    )
        return keys

    async def entrypoint(self, link: RuleLink, *, newer_than: float | None = None) -> Ruleset | None:
        """The (zone, phase) entry point from the shared copy, fresh enough for the purpose."""

        async def lister() -> AsyncIterator[Ruleset]:
            try:
                yield await link.client.get_entrypoint(link.zone_id, link.phase)
            except NotFound:
                return

        found = await self.engine.rulesets.items(link.collection, lister, newer_than=newer_than)
        return found.get(ENTRYPOINT)

    def keep(self, link: RuleLink, ruleset: Ruleset) -> None:
        """Cloudflare's answer to a write becomes the shared copy."""
        self.engine.rulesets.put(link.collection, ruleset)

    async def connect(self, obj: RuleT) -> RuleLink:
        spec: RuleSpec = obj.spec
        zone = await ready_zone(self.credentials, self.parent(obj, "zone_ref"), obj.namespace)
        link = RuleLink(zone.account, zone.zone_id, spec.phase)
        if not obj.metadata.deleting:
            await self._lists_exist(link, spec.expression)
        if not obj.metadata.deleting:
            problem = await self.conflict(link, obj, await self.entrypoint(link))
            if problem is not None:
                raise NotReady(Reason.RULESET_CONFLICT, problem, requeue_after=RETRY_PARENT)
        return link

    async def _lists_exist(self, link: RuleLink, expression: str) -> None:
        """Cloudflare refuses a rule naming a list the account lacks: such a rule waits until the list exists."""
        names = list_names(expression, link.phase)
        if not names:
            return
        account = link.account
        held = await self.engine.lists.items(
            lists_key(account.account_id), lambda: account.client.list_lists(account.account_id)
        )
        missing = sorted(names - {found.name for found in held.values()})
        if missing:
            raise NotReady(
                Reason.LIST_NOT_FOUND,
                f"the account has no list ${missing[0]} yet; the rule is written once it exists",
                requeue_after=RETRY_PARENT,
            )

    async def observe(self, link: RuleLink, obj: RuleT, object_id: str) -> ObservedRule | None:
        ruleset = await self.entrypoint(link)
        found = _by_id(ruleset, object_id)
        if found is None:
            # Not in the copy: deleted outside kflare, most likely. One read makes sure before it is written again.
            ruleset = await self.entrypoint(link, newer_than=time.monotonic())
            found = _by_id(ruleset, object_id)
        return found

    async def find(self, link: RuleLink, obj: RuleT) -> ObservedRule | None:
        # After a crash or a timeout a create may have landed: only a copy read from now on is sure to show it.
        newer_than = time.monotonic() if pending_intent(self, obj) is not None else None
        return _by_ref(await self.entrypoint(link, newer_than=newer_than), self.ref_of(obj))

    def definition(self, obj: RuleT) -> RuleBody:
        """The complete rule as kflare writes it."""
        spec: SpecT = obj.spec
        body: RuleBody = {
            "ref": self.ref_of(obj),
            "action": self.action(spec),
            "expression": spec.expression,
            "description": spec.description or "",
            "enabled": spec.enabled,
        }
        parameters = self.parameters(spec)
        if parameters is not None:
            body["action_parameters"] = parameters
        body.update(self.extras(spec))
        return body

    async def create(self, link: RuleLink, obj: RuleT) -> ObservedRule:
        ref = self.ref_of(obj)
        async with self.engine.lock(link.collection):
            ruleset = await self.entrypoint(link)
            if ruleset is None:
                ruleset = await self._create_entrypoint(link)
            body = self.definition(obj)
            keys = self.order_keys(obj, link.phase)
            keys.setdefault(ref, (obj.spec.priority, obj.namespace or "", obj.metadata.name))
            position = placement(ruleset.rules, ref, keys)
            if position is not None:
                body["position"] = position
            try:
                ruleset = await link.client.create_rule(link.zone_id, ruleset.id, body)
            except Terminal:
                if "position" not in body:
                    raise
                # The copy may be stale (the neighbour deleted outside kflare): place it again from a fresh read.
                fresh = await self.entrypoint(link, newer_than=time.monotonic())
                if fresh is None or _by_ref(fresh, ref) is not None:
                    raise
                body.pop("position", None)
                position = placement(fresh.rules, ref, keys)
                if position is not None:
                    body["position"] = position
                ruleset = await link.client.create_rule(link.zone_id, fresh.id, body)
            self.keep(link, ruleset)
        created = _by_ref(ruleset, ref)
        assert created is not None, "Cloudflare answered a ruleset without the rule it added"
        return created

    async def _create_entrypoint(self, link: RuleLink) -> Ruleset:
        try:
            ruleset = await link.client.create_entrypoint(link.zone_id, link.phase)
        except Terminal:
            # Made meanwhile by someone else: use theirs, as it is.
            found = await self.entrypoint(link, newer_than=time.monotonic())
            if found is None:
                raise
            return found
        self.keep(link, ruleset)
        return ruleset

    def diff(self, link: RuleLink, obj: RuleT, observed: ObservedRule) -> Changes:
        wanted = _normal_rule(self.definition(obj))
        rule = observed.rule
        have = _normal_rule(
            {
                "ref": rule.ref,
                "action": rule.action,
                "expression": rule.expression,
                "description": rule.description or "",
                "enabled": rule.enabled,
                "action_parameters": self.observed_parameters(rule.action_parameters),
                "ratelimit": rule.ratelimit,
                "logging": rule.logging,
            }
        )
        changes = {key: wanted.get(key) for key in ("ref", *DEFINITION) if wanted.get(key) != have.get(key)}
        if moves(observed.ruleset.rules, self.order_keys(obj, observed.ruleset.phase or "")):
            changes["position"] = True
        return changes

    async def update(self, link: RuleLink, obj: RuleT, observed: ObservedRule, changes: Changes) -> ObservedRule:
        rule_id = observed.rule.id
        async with self.engine.lock(link.collection):
            ruleset: Ruleset | None = observed.ruleset
            if set(changes) - {"position"}:
                ruleset = await link.client.edit_rule(link.zone_id, observed.ruleset.id, rule_id, self.definition(obj))
                self.keep(link, ruleset)
            ruleset = await self.entrypoint(link)  # the newest copy: other rules may have moved meanwhile
            if ruleset is not None:
                for moved, position in moves(ruleset.rules, self.order_keys(obj, link.phase)):
                    ruleset = await link.client.edit_rule(link.zone_id, ruleset.id, moved, {"position": position})
                    self.keep(link, ruleset)
        found = _by_id(ruleset, rule_id)
        if found is None:
            raise NotFound(message=f"rule {rule_id} is no longer in the {link.phase} entry point")
        return found

    async def delete(self, link: RuleLink, obj: RuleT, object_id: str) -> None:
        async with self.engine.lock(link.collection):
            ruleset = await self.entrypoint(link)
            if ruleset is None or _by_id(ruleset, object_id) is None:
                return  # already gone
            found = _by_id(ruleset, object_id)
            assert found is not None
            if found.rule.ref != self.ref_of(obj):
                return  # the ID now names a rule kflare did not make: never touched
            try:
                ruleset = await link.client.delete_rule(link.zone_id, ruleset.id, object_id)
            except NotFound:
                self.engine.rulesets.forget(link.collection)
                raise
            self.keep(link, ruleset)
            if self.drops_empty_entrypoint and not ruleset.rules:
                with contextlib.suppress(NotFound):
                    await link.client.delete_ruleset(link.zone_id, ruleset.id)
                self.engine.rulesets.drop(link.collection, ENTRYPOINT)

    def record(self, link: RuleLink, obj: RuleT, observed: ObservedRule) -> None:
        obj.status.cloudflare_metadata = RuleMetadata(
            zone_id=link.zone_id,
            ruleset_id=observed.ruleset.id,
            rule_id=observed.rule.id,
            ref=observed.rule.ref,
            version=observed.rule.version,
        )


def _by_id(ruleset: Ruleset | None, rule_id: str) -> ObservedRule | None:
    if ruleset is None:
        return None
    rule = next((r for r in ruleset.rules if r.id == rule_id), None)
    return None if rule is None else ObservedRule(rule, ruleset)


def _by_ref(ruleset: Ruleset | None, ref: str) -> ObservedRule | None:
    if ruleset is None:
        return None
    rule = next((r for r in ruleset.rules if r.ref == ref), None)
    return None if rule is None else ObservedRule(rule, ruleset)
