"""DNS records of a zone: list, create, get, overwrite (PUT), edit (PATCH), delete and the batch endpoint.

Reading needs ``dns:read``, writing ``dns:edit``, and the token must reach the zone; refusals use the product codes
(403/10000). The rules of records themselves are in :mod:`app.emulator.objects.dns`.

List filters: ``type``; ``name`` and ``content`` (plain = exact) with ``.exact``, ``.contains``, ``.startswith``,
``.endswith``; ``comment`` and ``tag`` with those and ``.present``/``.absent`` (tags written ``name:value``);
``proxied``; ``search`` (substring of name, content or comment); ``match=any|all`` joins the filters, ``tag_match``
the tag filters first. All text filters ignore case. ``order`` is one of ``type``, ``name``, ``content``, ``ttl``,
``proxied`` (default: type, then name, then content). ``per_page``: default 100, 1..5,000,000.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import QueryParams

from app.emulator.auth import Principal, ProductPrincipal
from app.emulator.context import Emulator, EmulatorDep
from app.emulator.envelope import ok, parse_model, read_json
from app.emulator.ids import is_id
from app.emulator.objects import dns
from app.emulator.paging import (
    PageSpec,
    Predicate,
    bool_param,
    combine,
    direction_of,
    page_of,
    require_id,
    sort_by,
    text_match,
)
from app.emulator.permissions import Level, register_resource
from app.emulator.routes.zones import zone_for
from app.emulator.state import Obj

register_resource("dns")

router = APIRouter(tags=["dns"])

PAGE = PageSpec(default=100, minimum=1, maximum=5_000_000)

_TEXT_OPERATORS = ("exact", "contains", "startswith", "endswith")
_ORDER_KEYS: dict[str, Any] = {
    "type": lambda r: r["type"],
    "name": lambda r: r["name"],
    "content": lambda r: r["content"].casefold(),
    "ttl": lambda r: r["ttl"],
    "proxied": lambda r: r["proxied"],
}


def _zone(emulator: Emulator, principal: Principal, zone_id: str, path: str, level: Level) -> Obj:
    zone = zone_for(emulator, principal, zone_id, path)
    principal.require("dns", level)
    return zone


def _record(emulator: Emulator, zone: Obj, record_id: str, path: str) -> Obj:
    require_id(record_id, path, is_id)
    record = emulator.store.dns_records.get(record_id)
    if record is None or emulator.store.dns_records.parent_id(record_id) != zone["id"]:
        raise dns.record_not_found()
    return record


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


@router.get("/zones/{zone_id}/dns_records")
async def list_records(
    zone_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    zone = _zone(emulator, principal, zone_id, request.url.path, "read")
    query = request.query_params
    keep = _record_filter(query)
    order_name = query.get("order")
    order = _ORDER_KEYS.get(order_name or "")
    records = (r for r in emulator.store.dns_records.under(zone["id"]) if keep(r))
    if order is None:
        ordered = sort_by(records, lambda r: (r["type"], r["name"], r["content"].casefold(), r["id"]), "asc")
    else:
        ordered = sort_by(records, lambda r: (order(r), r["name"], r["id"]), direction_of(query))
    page, info = page_of(ordered, query, PAGE)
    return ok(page, result_info=info)


@router.post("/zones/{zone_id}/dns_records")
async def create_record(
    zone_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    raw = await read_json(request)
    zone = _zone(emulator, principal, zone_id, request.url.path, "edit")
    body = parse_model(dns.RecordInput, raw, dns.body_invalid)
    body.id = None
    record = dns.build_record(zone, body)
    siblings = emulator.store.dns_records.under(zone["id"])
    dns.check_conflicts(siblings, record)
    dns.check_quota(zone, len(siblings) + 1)
    emulator.store.dns_records.add(record, zone["id"])
    return ok(record)


@router.post("/zones/{zone_id}/dns_records/batch")
async def batch_records(
    zone_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    raw = await read_json(request)
    zone = _zone(emulator, principal, zone_id, request.url.path, "edit")
    batch = parse_model(dns.BatchInput, raw, dns.body_invalid)
    rows = emulator.store.dns_records.copy_under(zone["id"])
    result = dns.apply_batch(zone, rows, batch)
    emulator.store.dns_records.replace_under(zone["id"], rows)
    return ok(result)


@router.get("/zones/{zone_id}/dns_records/{record_id}")
async def get_record(
    zone_id: str, record_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    zone = _zone(emulator, principal, zone_id, request.url.path, "read")
    return ok(_record(emulator, zone, record_id, request.url.path))


async def _change(
    zone_id: str, record_id: str, request: Request, principal: Principal, emulator: Emulator, *, partial: bool
) -> JSONResponse:
    raw = await read_json(request)
    zone = _zone(emulator, principal, zone_id, request.url.path, "edit")
    previous = _record(emulator, zone, record_id, request.url.path)
    body = parse_model(dns.RecordInput, raw, dns.body_invalid)
    record = dns.build_record(zone, body, previous=previous, partial=partial)
    dns.check_conflicts(emulator.store.dns_records.under(zone["id"]), record)
    emulator.store.dns_records.add(record, zone["id"])
    return ok(record)


@router.put("/zones/{zone_id}/dns_records/{record_id}")
async def overwrite_record(
    zone_id: str, record_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    return await _change(zone_id, record_id, request, principal, emulator, partial=False)


@router.patch("/zones/{zone_id}/dns_records/{record_id}")
async def edit_record(
    zone_id: str, record_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    return await _change(zone_id, record_id, request, principal, emulator, partial=True)


@router.delete("/zones/{zone_id}/dns_records/{record_id}")
async def delete_record(
    zone_id: str, record_id: str, request: Request, principal: ProductPrincipal, emulator: EmulatorDep
) -> JSONResponse:
    zone = _zone(emulator, principal, zone_id, request.url.path, "edit")
    _record(emulator, zone, record_id, request.url.path)
    emulator.store.dns_records.remove(record_id)
    return ok({"id": record_id})
