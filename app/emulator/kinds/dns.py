"""DNS records of a zone: list, create, get, overwrite (PUT), edit (PATCH), delete and the all-or-nothing batch.

Reading needs ``dns:read``, writing ``dns:edit``, and the token must reach the zone; refusals use the product codes
(403/10000).

List filters: ``type``; ``name`` and ``content`` (plain = exact) with ``.exact``, ``.contains``, ``.startswith``,
``.endswith``; ``comment`` and ``tag`` with those and ``.present``/``.absent`` (tags written ``name:value``);
``proxied``; ``search`` (substring of name, content or comment); ``match=any|all`` joins the filters, ``tag_match``
the tag filters first. All text filters ignore case. ``order`` is one of ``type``, ``name``, ``content``, ``ttl``,
``proxied`` (default: type, then name, then content). ``per_page``: default 100, 1..5,000,000.

State-file entries: the create body, nested under their zone or at the top level with ``zone_id`` or ``zone`` (the
zone's name), and may fix ``id``, ``created_on`` and ``modified_on``.

Normalisation, as Cloudflare does it: ``name`` becomes a lowercase FQDN in Punycode under the zone (``@`` is the apex,
a relative or foreign name gets the zone appended); ``type`` is uppercased; ``ttl`` defaults to 1 (automatic) and
proxied records always have ``ttl: 1``; ``proxied`` defaults to false; ``proxiable`` is true for A, AAAA and CNAME;
AAAA content is written in compressed form and host names lowercase without the trailing dot; record types with
structured ``data`` (CAA, SRV, ...) get ``content`` formatted from it, or ``data`` parsed from ``content``; ``priority``
is kept for MX and URI only; ``comment_modified_on``/``tags_modified_on`` appear once a comment/tags were set.
PUT replaces the whole record (what is not sent goes back to its default), PATCH changes only the fields sent.

Errors (HTTP 400 unless noted; *unverified* where no source settles the code):

=====================  ==============================================================  ==========
code                   when                                                            confidence
=====================  ==============================================================  ==========
81044 (404)            record not found                                                observed
81058                  identical record (name, type, content) exists                   observed
81053                  a CNAME where an A, AAAA or CNAME of that name exists (also a   observed
                       duplicate CNAME)
81054                  an A/AAAA where a CNAME of that name exists                     observed
81045                  record quota of the zone's plan exceeded                        observed
9005 / 9006            content of an A / AAAA record is not an IPv4 / IPv6 address     observed
1004 + chain 9000      invalid name                                                    observed
1004 + chain 9007      invalid CNAME/NS/MX/PTR target                                  observed
1004 + chain 9021      TTL outside 1 or 60..86400 (30.. on Enterprise)                 observed
1004 + chain 9041      proxied on a type that cannot be proxied                        observed
1004 + chain 9300      tags beyond the plan's quota (0 on Free, 20 otherwise)          observed
1004 + chain 9313      comment beyond 100 characters on Free (500 otherwise)           observed
1004 + chain 9101      missing or malformed field (type, content, data, priority...)   unverified
1004 + chain 9102      batch larger than the plan allows (200 on Free, else 3,500)     unverified
=====================  ==============================================================  ==========

Deviation from the written reference: an NS record does not forbid other records of its name, because the current
API models such records as "shadowed" rather than refusing them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, JsonValue
from starlette.datastructures import QueryParams

from app.emulator.collection import Ctx, Kind, Verb
from app.emulator.envelope import JSON, CloudflareError, ok, parse_model, read_json
from app.emulator.kinds.dns_records import (
    RecordInput,
    body_invalid,
    build_record,
    check_conflicts,
    check_quota,
    dns_invalid,
    record_not_found,
)
from app.emulator.kinds.zones import limits_of
from app.emulator.paging import PageNumbers, PageSpec, Predicate, bool_param, combine, direction_of, sort_by, text_match
from app.emulator.routes import route
from app.emulator.seed import SeedError
from app.emulator.state import Obj, Store

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

# Batch


class BatchInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    deletes: list[dict[str, JsonValue]] | None = None
    patches: list[dict[str, JsonValue]] | None = None
    puts: list[dict[str, JsonValue]] | None = None
    posts: list[dict[str, JsonValue]] | None = None


def _batch_item(item: object, *, needs_id: bool) -> RecordInput:
    parsed = parse_model(RecordInput, item, body_invalid)
    if needs_id and not parsed.id:
        raise dns_invalid(9101, "id is a required field.")
    return parsed


def apply_batch(zone: Obj, rows: dict[str, Obj], batch: BatchInput) -> Obj:
    """Apply deletes, then patches, then puts, then posts to ``rows`` (a copy: the caller commits on success)."""
    deletes, patches, puts, posts = batch.deletes or [], batch.patches or [], batch.puts or [], batch.posts or []
    cap = limits_of(zone).batch_operations
    total = len(deletes) + len(patches) + len(puts) + len(posts)
    if total > cap:
        raise dns_invalid(9102, f"A batch may hold at most {cap} operations on this zone's plan, got {total}.")
    result: Obj = {"deletes": [], "patches": [], "puts": [], "posts": []}
    for item in deletes:
        record_id = item.get("id")
        if not isinstance(record_id, str) or record_id not in rows:
            raise record_not_found()
        result["deletes"].append(rows.pop(record_id))
    for section, partial, items in (("patches", True, patches), ("puts", False, puts)):
        for item in items:
            body = _batch_item(item, needs_id=True)
            previous = rows.get(body.id or "")
            if previous is None:
                raise record_not_found()
            record = build_record(zone, body, previous=previous, partial=partial)
            check_conflicts(rows.values(), record)
            rows[record["id"]] = record
            result[section].append(record)
    for item in posts:
        body = _batch_item(item, needs_id=False)
        body.id = None
        record = build_record(zone, body)
        check_conflicts(rows.values(), record)
        check_quota(zone, len(rows) + 1)
        rows[record["id"]] = record
        result["posts"].append(record)
    return result


# Listing

_TEXT_OPERATORS = ("exact", "contains", "startswith", "endswith")
_ORDER_KEYS: dict[str, Callable[[Obj], SupportsRichComparison]] = {
    "type": lambda r: r["type"],
    "name": lambda r: r["name"],
    "content": lambda r: r["content"].casefold(),
    "ttl": lambda r: r["ttl"],
    "proxied": lambda r: r["proxied"],
}


def _text_predicate(field: str, operator: str, needle: str) -> Predicate[Obj]:
    return lambda record: text_match(record.get(field), operator, needle)


def _text_filters(query: QueryParams, field: str) -> list[Predicate[Obj]]:
    predicates: list[Predicate[Obj]] = []
    for key, operator in [(field, "exact"), *((f"{field}.{op}", op) for op in _TEXT_OPERATORS)]:
        needle = query.get(key)
        if needle is not None:
            predicates.append(_text_predicate(field, operator, needle))
    return predicates


def _split_tag(tag: str) -> tuple[str, str | None]:
    name, sep, value = tag.partition(":")
    return name.casefold(), (value if sep else None)


def _tag_predicate(name: str, operator: str | None, needle: str | None, *, absent: bool = False) -> Predicate[Obj]:
    """Has a tag ``name`` (whose value matches, with an operator); ``absent`` negates."""

    def has(record: Obj) -> bool:
        for tag in record["tags"]:
            tag_name, tag_value = _split_tag(tag)
            if tag_name == name and (operator is None or text_match(tag_value or "", operator, needle or "")):
                return True
        return False

    return (lambda record: not has(record)) if absent else has


def _tag_filters(query: QueryParams) -> list[Predicate[Obj]]:
    predicates: list[Predicate[Obj]] = []
    for raw in query.getlist("tag"):
        name, value = _split_tag(raw)
        predicates.append(_tag_predicate(name, None if value is None else "exact", value))
    for raw in query.getlist("tag.present"):
        predicates.append(_tag_predicate(_split_tag(raw)[0], None, None))
    for raw in query.getlist("tag.absent"):
        predicates.append(_tag_predicate(_split_tag(raw)[0], None, None, absent=True))
    for operator in _TEXT_OPERATORS:
        for raw in query.getlist(f"tag.{operator}"):
            name, value = _split_tag(raw)
            predicates.append(_tag_predicate(name, operator, value or ""))
    return predicates


def _record_filter(query: QueryParams) -> Predicate[Obj]:
    predicates: list[Predicate[Obj]] = []
    if query.get("type"):
        wanted = query["type"].upper()
        predicates.append(lambda r: r["type"] == wanted)
    predicates += _text_filters(query, "name") + _text_filters(query, "content") + _text_filters(query, "comment")
    if query.get("comment.present") is not None:
        predicates.append(lambda r: r.get("comment") is not None)
    if query.get("comment.absent") is not None:
        predicates.append(lambda r: r.get("comment") is None)
    proxied = bool_param(query, "proxied")
    if proxied is not None:
        predicates.append(lambda r: r["proxied"] is proxied)
    tags = _tag_filters(query)
    if tags:
        predicates.append(combine(tags, query.get("tag_match")))
    keep = combine(predicates, query.get("match"))
    search = query.get("search")
    if not search:
        return keep
    return lambda r: (
        keep(r) and any(text_match(r.get(field), "contains", search) for field in ("name", "content", "comment"))
    )


# The kind


class DNSRecords(Kind):
    name = "dns_records"
    parent = "zones"
    parent_field = "zone_id"
    path = "/zones/{zone_id}/dns_records"
    scope_param = "zone_id"
    item_param = "dns_record_id"
    resource = "dns"
    paging = PageNumbers(PageSpec(default=100, minimum=1, maximum=5_000_000))
    create_body = update_body = patch_body = RecordInput
    stamps = ("created_on", "modified_on", "comment_modified_on", "tags_modified_on")
    summary_fields = ("name", "type")

    def not_found(self) -> CloudflareError:
        return record_not_found()

    def body_error(self, message: str, pointer: str | None) -> CloudflareError:
        return body_invalid(message, pointer)

    def parse(self, ctx: Ctx | None, raw: JsonValue, verb: Verb) -> BaseModel:
        body = parse_model(RecordInput, raw, body_invalid)
        if verb == "create":
            body.id = None
        return body

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, RecordInput)
        assert parent is not None
        return build_record(parent, body, previous=previous, partial=partial)

    def admit(self, store: Store, parent: Obj | None, parent_key: str | None, obj: Obj, previous: Obj | None) -> None:
        assert parent is not None
        assert parent_key is not None
        siblings = self.siblings(store, parent_key)
        check_conflicts(siblings, obj)
        if previous is None:
            check_quota(parent, len(siblings) + 1)

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        return _record_filter(ctx.query)

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        order = _ORDER_KEYS.get(ctx.query.get("order") or "")
        if order is None:
            return sort_by(items, lambda r: (r["type"], r["name"], r["content"].casefold(), r["id"]), "asc")
        return sort_by(items, lambda r: (order(r), r["name"], r["id"]), direction_of(ctx.query))

    def render(self, ctx: Ctx, obj: Obj) -> Obj:
        return obj

    def seed_fields(self, entry: JSON) -> JSON:
        return {key: value for key, value in entry.items() if key not in ("zone", "zone_id")}

    def find_parent(self, store: Store, entry: JSON, where: str) -> tuple[Obj, str]:
        if entry.get("zone_id") is not None:
            zone = store.zones.get(str(entry["zone_id"]))
            if zone is None:
                raise SeedError(f"{where}: unknown zone_id {entry['zone_id']}")
            return zone, zone["id"]
        if entry.get("zone") is None:
            raise SeedError(f"{where}: a top-level DNS record needs zone_id or zone")
        name = str(entry["zone"]).lower().rstrip(".")
        matches = [z for z in store.zones if z["name"] == name]
        if len(matches) != 1:
            raise SeedError(f"{where}: zone {entry['zone']!r} names {len(matches)} zones; use zone_id")
        return matches[0], matches[0]["id"]

    def extra_routes(self, router: APIRouter) -> None:
        route(router, "POST", f"{self.path}/batch", "dns_records_batch", self.batch)

    async def batch(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        raw = await read_json(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        assert ctx.parent is not None
        assert ctx.parent_key is not None
        batch = parse_model(BatchInput, raw, body_invalid)
        table = self.table(ctx.store)
        rows = table.copy_under(ctx.parent_key)
        result = apply_batch(ctx.parent, rows, batch)
        table.replace_under(ctx.parent_key, rows)
        return ok(result)


KIND = DNSRecords()
