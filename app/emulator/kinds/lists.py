"""Custom lists of an account (``$name`` in rule expressions), their items, and the asynchronous bulk operations that
write the items.

A list: ``{id, name, kind, description, num_items, num_referencing_filters, created_on, modified_on}``; ``name`` is
``[a-z0-9_]`` up to 50 characters, unique per account, and with ``kind`` fixed at creation (PUT changes the
description only). Only ``ip`` lists are served (hostname, ASN and redirect lists are Enterprise features).
``num_referencing_filters`` counts the rules of the account's zones whose expression names ``$name``, and such a
list cannot be deleted. Listing is one page.

Items: ``{id, ip, comment, created_on, modified_on}``; an IPv4 address, an IPv4 CIDR from /8 to /32, or an IPv6 CIDR
from /12 to /64 (written lowercase and compressed), listed in address order. ``POST .../items`` adds (an address
already there gets the new comment), ``PUT .../items`` replaces every item (``[]`` empties the list), ``DELETE
.../items`` with ``{"items": [{"id"}]}`` removes; each answers ``{"operation_id"}``, and ``GET
/accounts/{account_id}/rules/lists/bulk_operations/{operation_id}`` tells ``pending``/``running``, then
``completed`` (with ``completed``, a timestamp) or ``failed`` (with ``error``: a bad item fails the whole operation and
changes nothing). How many polls answer ``running`` before the operation completes is the option
``list_operation_polls`` (default 0: done at once); the items change when it completes. While an operation of the
account is unfinished, another write is refused with 429. ``GET .../items`` pages with ``cursors.after``
(``per_page`` 1..500, default 25) and takes ``search`` (a substring of the address or comment).

The Free plan: one list per account and 10,000 items across the account's lists (options ``lists_per_account`` and
``list_items_per_account``: the emulator does not know an account's plan). Reading needs ``lists:read``, writing
``lists:edit``.

Unverified: every code here (not found 404/10031, duplicate name 400/10026, over the count 400/10033, a list in use
400/10047, a bad item 400/10021 in the operation's error, an overlapping write 429/10050), the per-page bounds, and
whether a bare IPv6 address is taken (it is refused here).

State-file entries: ``lists`` ``{name, kind?, description?, account_id?, id?, created_on?, modified_on?}`` with
``list_items`` ``{ip, comment?}`` nested; ``list_operations`` are kept as they are.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import re
from collections.abc import Iterable, Sequence
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.datastructures import QueryParams

from app.emulator.collection import Ctx, Kind, Unique
from app.emulator.envelope import JSON, CloudflareError, invalid_body, ok, parse_model, read_json
from app.emulator.ids import new_id, now_iso
from app.emulator.paging import Paging, Predicate, Render, SinglePage, sort_by
from app.emulator.routes import route
from app.emulator.state import Obj, Store

RESOURCE = "lists"
_NAME = re.compile(r"[a-z0-9_]{1,50}")


def _list_not_found() -> CloudflareError:
    return CloudflareError.single(404, 10031, "list not found")


def _bad_item(message: str) -> CloudflareError:
    return CloudflareError.single(400, 10021, message)


class ListCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    kind: Literal["ip", "redirect", "hostname", "asn"] = "ip"
    description: str = ""


class ListUpdate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    description: str = ""


_STRING = re.compile(r'r(#*)".*?"\1|"(?:[^"\\]|\\.)*"', re.DOTALL)
_LIST_REFERENCE = re.compile(r"\$([a-z0-9_]+)")


def lists_named(expression: str) -> set[str]:
    """The custom lists (``$name``) an expression uses: a ``$`` inside a string (``"/$admin"``) names none."""
    return set(_LIST_REFERENCE.findall(_STRING.sub('""', expression)))


def references(store: Store, account_id: str, name: str) -> int:
    """How many rules of the account's zones use ``$name``."""
    return sum(
        1
        for zone in store.zones.under(account_id)
        for ruleset in store.table("rulesets").under(zone["id"])
        for rule in ruleset["rules"]
        if name in lists_named(str(rule.get("expression") or ""))
    )


class Lists(Kind):
    name = "lists"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/rules/lists"
    scope_param = "account_id"
    item_param = "list_id"
    resource = RESOURCE
    verbs = frozenset({"list", "create", "get", "update", "delete"})
    paging = SinglePage()
    unique = (Unique(("name",), lambda o: CloudflareError.single(400, 10026, f"a list named {o['name']} exists")),)
    create_body = ListCreate
    update_body = ListUpdate
    options = {"lists_per_account": 1, "list_items_per_account": 10_000, "list_operation_polls": 0}

    def not_found(self) -> CloudflareError:
        return _list_not_found()

    async def create(self, request: Request) -> JSONResponse:
        # The count is an option of the emulator, so it is checked here rather than as the kind's fixed limit.
        emulator, principal = await self.principal(request)
        raw = await read_json(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        limit = emulator.options["lists_per_account"]
        if len(self.siblings(ctx.store, ctx.parent_key)) >= limit:
            raise CloudflareError.single(400, 10033, f"the account may hold at most {limit} lists")
        return await self._create(ctx, raw)

    async def _create(self, ctx: Ctx, raw: JsonValue) -> JSONResponse:
        body = self.parse(ctx, raw, "create")
        obj = self.build(ctx.store, ctx.parent, body, None, False)
        self.admit(ctx.store, ctx.parent, ctx.parent_key, obj, None)
        self.table(ctx.store).add(obj, ctx.parent_key)
        return ok(self.render(ctx, obj))

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        now = now_iso()
        if previous is not None:
            assert isinstance(body, ListUpdate)
            return {**previous, "description": body.description, "modified_on": now}
        assert isinstance(body, ListCreate)
        if not _NAME.fullmatch(body.name):
            raise invalid_body("name: lowercase letters, digits and '_', at most 50", pointer="/name")
        if body.kind != "ip":
            raise invalid_body(f"{body.kind} lists are not available on this plan", pointer="/kind")
        return {
            "id": self.new_id(),
            "name": body.name,
            "kind": body.kind,
            "description": body.description,
            "created_on": now,
            "modified_on": now,
        }

    def render(self, ctx: Ctx, obj: Obj) -> Obj:
        return render_list(ctx.store, obj, str(ctx.parent_key))

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda item: item["name"], "asc")

    def before_delete(self, ctx: Ctx, obj: Obj) -> None:
        if references(ctx.store, str(ctx.parent_key), obj["name"]):
            raise CloudflareError.single(400, 10047, f"list {obj['name']} is referenced by rules and cannot be deleted")

    def extra_routes(self, router: APIRouter) -> None:
        route(router, "GET", f"{self.path}/bulk_operations/{{operation_id}}", "lists_operation", OPERATIONS.get_one)


def render_list(store: Store, obj: Obj, account_id: str) -> Obj:
    return {
        **copy.deepcopy(obj),
        "num_items": store.table("list_items").count_under(obj["id"]),
        "num_referencing_filters": references(store, account_id, obj["name"]),
    }


# Items


class ItemInput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ip: str
    comment: str | None = None


def normalise_ip(text: str) -> str:
    value = text.strip()
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError:
        raise _bad_item(f"{text!r} is not an IP address or CIDR") from None
    if network.version == 4:
        if not 8 <= network.prefixlen <= 32:
            raise _bad_item(f"{text!r}: IPv4 ranges go from /8 to /32")
        return str(network.network_address) if network.prefixlen == 32 else str(network)
    if "/" not in value or not 12 <= network.prefixlen <= 64:
        raise _bad_item(f"{text!r}: IPv6 entries are CIDR ranges from /12 to /64")
    return network.compressed


def _ip_order(item: Obj) -> tuple[int, int, int]:
    network = ipaddress.ip_network(item["ip"])
    return network.version, int(network.network_address), network.prefixlen


class CursorsAfter(Paging):
    """``CursorPaginationAfter``: ``result_info.cursors.after``, absent on the last page."""

    def respond(self, items: Sequence[Obj], query: QueryParams, render: Render) -> JSONResponse:
        raw = query.get("per_page")
        try:
            size = min(500, max(1, int(raw))) if raw else 25
            start = int(base64.urlsafe_b64decode((query.get("cursor") or "MA==").encode()).decode())
        except ValueError:
            raise invalid_body("cursor or per_page is not valid") from None
        chunk = list(items[start : start + size])
        cursors: JSON = {}
        if start + size < len(items):
            cursors["after"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return ok([render(item) for item in chunk], result_info={"cursors": cursors})


class ListItems(Kind):
    name = "list_items"
    parent = "lists"
    parent_field = "list_id"
    path = "/accounts/{account_id}/rules/lists/{list_id}/items"
    scope_param = "list_id"
    item_param = "item_id"
    resource = RESOURCE
    verbs = frozenset({"list", "get"})
    paging = CursorsAfter()
    create_body = ItemInput
    summary_fields = ("ip",)

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 10031, "list item not found")

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, ItemInput)
        now = now_iso()
        return {
            "id": self.new_id(),
            "ip": normalise_ip(body.ip),
            "comment": body.comment,
            "created_on": now,
            "modified_on": now,
        }

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        needle = (ctx.query.get("search") or "").casefold()
        return lambda item: needle in item["ip"].casefold() or needle in (item.get("comment") or "").casefold()

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sorted(items, key=_ip_order)

    def admit(self, store: Store, parent: Obj | None, parent_key: str | None, obj: Obj, previous: Obj | None) -> None:
        if any(other["ip"] == obj["ip"] and other["id"] != obj["id"] for other in self.siblings(store, parent_key)):
            raise _bad_item(f"{obj['ip']} is already in the list")

    def extra_routes(self, router: APIRouter) -> None:
        for method, verb in (("POST", "append"), ("PUT", "replace"), ("DELETE", "remove")):
            route(router, method, self.path, f"list_items_{verb}", self.write)

    async def write(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        raw = await read_json(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        assert ctx.parent is not None
        assert ctx.parent_key is not None
        account_id = ctx.scopes["accounts"]["id"]
        if any(op["status"] in ("pending", "running") for op in OPERATIONS.siblings(ctx.store, account_id)):
            raise CloudflareError.single(429, 10050, "a bulk operation is already pending for this account")
        action = {"POST": "append", "PUT": "replace", "DELETE": "remove"}[request.method]
        if action == "remove":
            items = raw.get("items") if isinstance(raw, dict) else None
            if not isinstance(items, list):
                raise invalid_body("items is a list of {id}", pointer="/items")
            payload: list[JsonValue] = [str(item.get("id")) for item in items if isinstance(item, dict)]
        else:
            if not isinstance(raw, list):
                raise invalid_body("the body is a list of items")
            payload = raw
        operation = OPERATIONS.start(ctx, account_id, ctx.parent_key, action, payload)
        return ok({"operation_id": operation["id"]})

    def apply(
        self,
        store: Store,
        options: dict[str, int],
        account_id: str,
        list_key: str,
        action: str,
        payload: list[JsonValue],
    ) -> None:
        """Carry out one bulk operation, all or nothing; a refusal is the operation's error."""
        table = self.table(store)
        rows = {item["id"]: item for item in table.under(list_key)}
        now = now_iso()
        if action == "remove":
            missing = [item_id for item_id in payload if item_id not in rows]
            if missing:
                raise _bad_item(f"no item {missing[0]} in the list")
            for item_id in payload:
                rows.pop(item_id)
        else:
            if action == "replace":
                rows = {}
            by_ip = {item["ip"]: item for item in rows.values()}
            for raw in payload:
                body = parse_model(ItemInput, raw, lambda message, _p: _bad_item(message))
                ip = normalise_ip(body.ip)
                if ip in by_ip:
                    by_ip[ip] = {**by_ip[ip], "comment": body.comment, "modified_on": now}
                else:
                    by_ip[ip] = {
                        "id": new_id(),
                        "ip": ip,
                        "comment": body.comment,
                        "created_on": now,
                        "modified_on": now,
                    }
            rows = {item["id"]: item for item in by_ip.values()}
        others = sum(
            table.count_under(lst["id"]) for lst in store.table("lists").under(account_id) if lst["id"] != list_key
        )
        limit = options["list_items_per_account"]
        if others + len(rows) > limit:
            raise _bad_item(f"the account's lists may hold at most {limit} items")
        table.replace_under(list_key, rows)
        owner = store.table("lists").get(list_key)
        if owner is not None:
            owner["modified_on"] = now


class ListOperations(Kind):
    name = "list_operations"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/rules/lists/bulk_operations"
    scope_param = "account_id"
    item_param = "operation_id"
    resource = RESOURCE
    verbs = frozenset()
    stamps = ()
    summary_fields = ("status",)

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 10031, "bulk operation not found")

    def start(self, ctx: Ctx, account_id: str, list_key: str, action: str, payload: list[JsonValue]) -> Obj:
        operation: Obj = {
            "id": new_id(),
            "status": "pending",
            "list_id": list_key,
            "action": action,
            "payload": payload,
            "polls_left": ctx.emulator.options["list_operation_polls"],
        }
        if operation["polls_left"] == 0:
            self._finish(ctx.store, ctx.emulator.options, account_id, operation)
        self.table(ctx.store).add(operation, account_id)
        return operation

    def _finish(self, store: Store, options: dict[str, int], account_id: str, operation: Obj) -> None:
        try:
            ITEMS.apply(store, options, account_id, operation["list_id"], operation["action"], operation["payload"])
        except CloudflareError as refused:
            operation.update(status="failed", error=refused.errors[0]["message"])
        else:
            operation["status"] = "completed"
        operation["completed"] = now_iso()

    async def get_one(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        operation = self.reach(ctx, ctx.param("operation_id"))
        if operation["status"] in ("pending", "running"):
            operation["polls_left"] -= 1
            if operation["polls_left"] < 0:
                self._finish(ctx.store, emulator.options, str(ctx.parent_key), operation)
            else:
                operation["status"] = "running"
        shown = {"id": operation["id"], "status": operation["status"]}
        for field in ("completed", "error"):
            if field in operation:
                shown[field] = operation[field]
        return ok(shown)

    def seed_body(self) -> type[BaseModel]:
        return OperationSeed


class OperationSeed(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: str = Field(default="completed")


LISTS = Lists()
ITEMS = ListItems()
OPERATIONS = ListOperations()
