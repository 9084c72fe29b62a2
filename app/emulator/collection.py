"""The generic object type: what every Cloudflare collection shares, so that a new type is declared in one module.

A :class:`Kind` says where its objects live (its table's parent kind and the URL that lists them), how they are
identified (ID format and generation, or a name), which verbs Cloudflare serves on them, how a body becomes an object
(:meth:`Kind.build`), what must be unique among siblings, how many a parent may hold, how lists filter, sort and page,
and what its errors look like. From that it serves, under ``/client/v4``:

=======================  ===================================  ===============
verb                     route                                 default answer
=======================  ===================================  ===============
``list``                 ``GET {path}``                        page of rendered objects (:attr:`Kind.paging`)
``create``               ``POST {path}``                       the new object
``get``                  ``GET {path}/{item}``                 the object
``update``               ``PUT {path}/{item}``                 the object, replaced
``patch``                ``PATCH {path}/{item}``               the object, changed where the body says
``delete``               ``DELETE {path}/{item}``              ``{"id": ...}`` (:meth:`Kind.deleted`)
=======================  ===================================  ===============

and it seeds and dumps through :mod:`app.emulator.seed` (a section of the state file named after the kind; children
may nest under their parent's entry). Each step is a method to override where Cloudflare does something special;
special endpoints are added in :meth:`Kind.extra_routes`.

The order of checks is Cloudflare's as far as it is known: credentials, then the body is read (before the store is
touched, since no route may await between reading and changing state), then the parent scope (which refuses what the
token cannot reach), the permission, the object, and last the body's content.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, JsonValue, ValidationError
from starlette.datastructures import QueryParams

from app.emulator.auth import Family, Principal, authenticate
from app.emulator.context import Emulator, emulator_of
from app.emulator.envelope import JSON, CloudflareError, invalid_body, ok, parse_model, pointer_of, read_json
from app.emulator.ids import is_id, new_id, now_iso, parse_iso
from app.emulator.paging import Paging, Predicate, SinglePage, direction_of, require_id, sort_by
from app.emulator.permissions import Level, register_resource
from app.emulator.routes import path_parameters
from app.emulator.seed import SeedError
from app.emulator.state import Obj, Store, Table

Verb = Literal["list", "create", "get", "update", "patch", "delete"]
ALL_VERBS: frozenset[Verb] = frozenset({"list", "create", "get", "update", "patch", "delete"})
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


# Uniqueness


@dataclass(frozen=True)
class Unique:
    """Fields whose values no two siblings share; ``error`` builds Cloudflare's refusal from the new object."""

    fields: tuple[str, ...]
    error: Callable[[Obj], CloudflareError]
    casefold: bool = False

    def value(self, obj: Obj) -> tuple[object, ...]:
        values = tuple(obj.get(name) for name in self.fields)
        return tuple(v.casefold() if self.casefold and isinstance(v, str) else v for v in values)


# One request


@dataclass
class Ctx:
    """One API call as the kinds see it: who calls, the store, and the object the URL scopes it to."""

    emulator: Emulator
    principal: Principal
    request: Request
    parent: Obj | None = None
    parent_key: str | None = None
    #: Every object the URL went through, by kind name (an account, then its KV namespace...).
    scopes: dict[str, Obj] = field(default_factory=dict)

    @property
    def store(self) -> Store:
        return self.emulator.store

    @property
    def path(self) -> str:
        return self.request.url.path

    @property
    def query(self) -> QueryParams:
        return self.request.query_params

    def param(self, name: str) -> str:
        value: str = self.request.path_params[name]
        return value


class Kind:
    """One Cloudflare object type. Subclass it, set the class attributes, override what Cloudflare does specially."""

    #: The table and state-file section, e.g. ``"kv_namespaces"``.
    name: ClassVar[str]
    #: The kind whose objects hold these (their table parent), or ``None``.
    parent: ClassVar[str | None] = None
    #: Other kinds whose objects these name (a Worker's bindings, the lists a rule uses): they seed first.
    refers_to: ClassVar[tuple[str, ...]] = ()
    #: The collection's URL, e.g. ``"/accounts/{account_id}/storage/kv/namespaces"``.
    path: ClassVar[str]
    #: The URL parameter naming the parent (``None``: the URL is not under the parent, as for zones).
    scope_param: ClassVar[str | None] = None
    #: The URL parameter naming one object.
    item_param: ClassVar[str] = "id"
    #: The field that identifies an object in its URL.
    id_field: ClassVar[str] = "id"
    #: The permission resource (see :mod:`app.emulator.permissions`) and the family of error codes.
    resource: ClassVar[str]
    family: ClassVar[Family] = Family.PRODUCT
    #: The object is itself what a token is scoped to (an account, a zone): permission is checked after finding it.
    self_scoped: ClassVar[bool] = False
    verbs: ClassVar[frozenset[Verb]] = ALL_VERBS
    paging: ClassVar[Paging] = SinglePage()
    unique: ClassVar[tuple[Unique, ...]] = ()
    #: How many objects one parent may hold (Free plan), or ``None``.
    limit: ClassVar[int | None] = None
    create_body: ClassVar[type[BaseModel] | None] = None
    update_body: ClassVar[type[BaseModel] | None] = None
    patch_body: ClassVar[type[BaseModel] | None] = None
    #: Fields a seeded (or re-seeded, dumped) entry keeps instead of fresh values.
    stamps: ClassVar[tuple[str, ...]] = ("created_on", "modified_on")
    #: The field of a dumped or top-level seeded entry that names its parent, e.g. ``"account_id"``.
    parent_field: ClassVar[str | None] = None
    #: Fields the store and the state file keep but the API never shows (a secret, a hint Cloudflare does not return).
    hidden: ClassVar[tuple[str, ...]] = ()
    #: Knobs of this kind's simulation, with their defaults, set through ``PUT /__emulator/options`` (whole numbers).
    options: ClassVar[dict[str, int]] = {}
    #: Summary fields of a seeded object in the seed's answer.
    summary_fields: ClassVar[tuple[str, ...]] = ("name",)

    def __init__(self) -> None:
        register_resource(self.resource)

    # Identity

    def new_id(self) -> str:
        return new_id()

    def valid_id(self, value: str) -> bool:
        return is_id(value)

    def key_of(self, obj: Obj, parent_key: str | None) -> str:
        """The object's key in its table: its ID, or for named objects the name under its parent."""
        value: str = obj[self.id_field]
        return value

    def key_for(self, ctx: Ctx, ident: str) -> str:
        """The table key the URL's ``ident`` names."""
        return ident

    def table(self, store: Store) -> Table:
        return store.table(self.name)

    # Errors

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 7003, "Could not route to the object, perhaps your identifier is invalid?")

    def body_error(self, message: str, pointer: str | None) -> CloudflareError:
        return invalid_body(message, pointer=pointer)

    def over_limit(self, parent: Obj | None, limit: int) -> CloudflareError:
        return invalid_body(f"at most {limit} {self.name} may exist here")

    # Scope and lookup

    def context(self, emulator: Emulator, principal: Principal, request: Request) -> Ctx:
        ctx = Ctx(emulator, principal, request)
        self.enter(ctx)
        return ctx

    def enter(self, ctx: Ctx) -> None:
        """Resolve the URL's scopes, outermost first, leaving the innermost as the context's parent."""
        if self.scope_param is None or self.parent is None:
            return
        parent_kind = ctx.store.kind(self.parent)
        parent_kind.enter(ctx)
        grandparent_key = ctx.parent_key
        parent = parent_kind.reach(ctx, ctx.param(self.scope_param))
        ctx.parent, ctx.parent_key = parent, parent_kind.key_of(parent, grandparent_key)
        ctx.scopes[parent_kind.name] = parent

    def reach(self, ctx: Ctx, ident: str) -> Obj:
        """The object ``ident`` names in the context's scope, or Cloudflare's refusal."""
        require_id(ident, ctx.path, self.valid_id)
        table = self.table(ctx.store)
        key = self.key_for(ctx, ident)
        obj = table.get(key)
        if obj is None or (ctx.parent is not None and table.parent_id(key) != ctx.parent_key):
            raise self.not_found()
        return obj

    def require(self, ctx: Ctx, level: Level) -> None:
        ctx.principal.require(self.resource, level)

    # Rules

    def parse(self, ctx: Ctx | None, raw: JsonValue, verb: Verb) -> BaseModel:
        model = {"create": self.create_body, "update": self.update_body, "patch": self.patch_body}.get(verb)
        if model is None:
            raise NotImplementedError(f"{self.name}: no body model for {verb}")
        return parse_model(model, raw, self.body_error)

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        """The object a create (``previous`` None), PUT (``previous``) or PATCH (``partial``) body produces.

        The default takes the body's fields as they are (for PATCH, over the previous object) and stamps the ID and
        ``created_on``/``modified_on`` where the kind's objects have them."""
        fields = body.model_dump(exclude_unset=partial)
        now = now_iso()
        if previous is None:
            obj: Obj = {self.id_field: self.new_id(), **fields}
            if "created_on" in self.stamps:
                obj["created_on"] = now
        else:
            obj = {**previous, **fields} if partial else {self.id_field: previous[self.id_field], **fields}
            for stamp in self.stamps:
                if stamp in previous and stamp != "modified_on":
                    obj[stamp] = previous[stamp]
        if "modified_on" in self.stamps:
            obj["modified_on"] = now
        return obj

    def parent_of(self, store: Store, parent_key: str) -> Obj | None:
        return None if self.parent is None else store.table(self.parent).get(parent_key)

    def siblings(self, store: Store, parent_key: str | None) -> list[Obj]:
        table = self.table(store)
        return table.under(parent_key) if parent_key is not None and table.parent else list(table)

    def admit(self, store: Store, parent: Obj | None, parent_key: str | None, obj: Obj, previous: Obj | None) -> None:
        """Refuse ``obj`` if it clashes with a sibling or is one too many."""
        replaced = None if previous is None else self.key_of(previous, parent_key)
        others = [o for o in self.siblings(store, parent_key) if self.key_of(o, parent_key) != replaced]
        for rule in self.unique:
            value = rule.value(obj)
            if any(rule.value(other) == value for other in others):
                raise rule.error(obj)
        if previous is None and self.limit is not None and len(others) + 1 > self.limit:
            raise self.over_limit(parent, self.limit)

    def render(self, ctx: Ctx, obj: Obj) -> JSON:
        return {key: copy.deepcopy(value) for key, value in obj.items() if key not in self.hidden}

    def created(self, ctx: Ctx, obj: Obj) -> JSON:
        """The answer to a create: the object, and whatever Cloudflare shows only then (a tunnel's token)."""
        return self.render(ctx, obj)

    def deleted(self, obj: Obj) -> JsonValue:
        return {"id": obj[self.id_field]}

    def before_delete(self, ctx: Ctx, obj: Obj) -> None:
        """Refuse a delete Cloudflare refuses (a non-empty bucket...)."""

    def after_delete(self, ctx: Ctx, obj: Obj) -> None:
        """What else goes with the object (its children go anyway)."""

    def after_write(self, ctx: Ctx, obj: Obj, previous: Obj | None) -> None:
        """What else changes with the object (a renamed account renames its zones' copies)."""

    # Listing

    def rows(self, ctx: Ctx) -> Iterable[Obj]:
        return self.siblings(ctx.store, ctx.parent_key)

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        return lambda _obj: True

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda o: str(o.get(self.id_field)), direction_of(ctx.query))

    # Verbs

    async def principal(self, request: Request) -> tuple[Emulator, Principal]:
        return emulator_of(request), authenticate(request, self.family)

    async def read_raw(self, request: Request, verb: Verb) -> JsonValue:
        return await read_json(request)

    async def list(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        keep = self.filters(ctx)
        items = self.order(ctx, (o for o in self.rows(ctx) if keep(o)))
        return self.paging.respond(items, ctx.query, lambda o: self.render(ctx, o))

    async def create(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        raw = await self.read_raw(request, "create")
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        body = self.parse(ctx, raw, "create")
        obj = self.build(ctx.store, ctx.parent, body, None, False)
        self.admit(ctx.store, ctx.parent, ctx.parent_key, obj, None)
        self.table(ctx.store).add(obj, ctx.parent_key, key=self.key_of(obj, ctx.parent_key))
        self.after_write(ctx, obj, None)
        return ok(self.created(ctx, obj))

    async def _found(self, request: Request, level: Level) -> tuple[Ctx, Obj]:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        if not self.self_scoped:
            self.require(ctx, level)
        obj = self.reach(ctx, request.path_params[self.item_param])
        if self.self_scoped:
            self.require(ctx, level)
        return ctx, obj

    async def get(self, request: Request) -> JSONResponse:
        ctx, obj = await self._found(request, "read")
        return ok(self.render(ctx, obj))

    async def _change(self, request: Request, verb: Verb) -> JSONResponse:
        raw = await self.read_raw(request, verb)
        ctx, previous = await self._found(request, "edit")
        body = self.parse(ctx, raw, verb)
        table = self.table(ctx.store)
        key = self.key_of(previous, ctx.parent_key)
        parent_key = table.parent_id(key)
        parent = ctx.parent if ctx.parent is not None or parent_key is None else self.parent_of(ctx.store, parent_key)
        obj = self.build(ctx.store, parent, body, previous, verb == "patch")
        self.admit(ctx.store, parent, parent_key, obj, previous)
        table.add(obj, parent_key, key=key)
        self.after_write(ctx, obj, previous)
        return ok(self.render(ctx, obj))

    async def update(self, request: Request) -> JSONResponse:
        return await self._change(request, "update")

    async def patch(self, request: Request) -> JSONResponse:
        return await self._change(request, "patch")

    async def delete(self, request: Request) -> JSONResponse:
        ctx, obj = await self._found(request, "edit")
        self.before_delete(ctx, obj)
        self.table(ctx.store).remove(self.key_of(obj, ctx.parent_key))
        self.after_delete(ctx, obj)
        return ok(self.deleted(obj))

    # Seeding and dumping (see app.emulator.seed)

    def seed(self, store: Store, entry: JSON, parent: Obj | None, parent_key: str | None, where: str) -> Obj:
        """Add one state-file entry, by the API's own rules, keeping the stamps it carries."""
        ident = entry.get(self.id_field)
        if ident is not None and not (isinstance(ident, str) and self.valid_id(ident)):
            raise SeedError(f"{where}: {self.id_field} {ident!r} is not a valid identifier")
        fields = {key: value for key, value in self.seed_fields(entry).items() if key not in self.stamps}
        body = parse_model(self.seed_body(), fields, self.body_error)
        table = self.table(store)
        obj = self.build(store, parent, body, None, False)
        if ident is not None:
            obj[self.id_field] = ident
        key = self.key_of(obj, parent_key)
        previous = table.get(key)
        if previous is not None and table.parent_id(key) != parent_key:
            raise SeedError(f"{where}: {previous[self.id_field]} belongs to another parent")
        for stamp in self.stamps:
            if stamp in obj and entry.get(stamp) is not None:
                obj[stamp] = check_stamp(entry[stamp], stamp, where)
        self.admit(store, parent, parent_key, obj, previous)
        table.add(obj, parent_key, key=key)
        return obj

    def seed_body(self) -> type[BaseModel]:
        if self.create_body is None:
            raise NotImplementedError(f"{self.name}: no create body to seed with")
        return self.create_body

    def seed_fields(self, entry: JSON) -> JSON:
        """The part of an entry that is a create body (the default: all but the parent reference)."""
        return {k: v for k, v in entry.items() if k != self.parent_field}

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        """One object as a state-file entry that seeds back to the same object."""
        out = copy.deepcopy(obj)
        if self.parent_field is not None and parent_key is not None:
            out = {self.parent_field: self.parent_ref(store, parent_key), **out}
        return out

    def parent_ref(self, store: Store, parent_key: str) -> str:
        """How a dumped entry names its parent; :meth:`find_parent` reads it back."""
        return parent_key

    def find_parent(self, store: Store, entry: JSON, where: str) -> tuple[Obj, str]:
        """The parent of a top-level entry: by :attr:`parent_field`, or the only account when there is one."""
        assert self.parent is not None
        parent_table = store.table(self.parent)
        ref = entry.get(self.parent_field or "")
        if ref is None:
            if self.parent == "accounts" and len(parent_table) == 1:
                only = next(iter(parent_table))
                return only, str(only["id"])
            raise SeedError(f"{where}: {self.parent_field} is needed")
        parent = parent_table.get(str(ref))
        if parent is None:
            raise SeedError(f"{where}: unknown {self.parent_field} {ref}")
        return parent, str(ref)

    def summary(self, obj: Obj, parent_key: str | None) -> JSON:
        out: JSON = {self.id_field: obj[self.id_field]}
        if self.parent_field is not None and parent_key is not None:
            out[self.parent_field] = parent_key
        out.update({name: obj.get(name) for name in self.summary_fields if name != self.id_field})
        return out

    # Routes

    def extra_routes(self, router: APIRouter) -> None:
        """Endpoints beyond the six verbs (a batch, settings, values...)."""

    def admin_routes(self, router: APIRouter) -> None:
        """Endpoints of the admin API (under ``/__emulator``) that simulate what no API call can (a connector...)."""

    def item_path(self) -> str:
        return f"{self.path}/{{{self.item_param}}}"

    def router(self) -> APIRouter:
        router = APIRouter(tags=[self.name])
        self.extra_routes(router)
        collection = path_parameters(self.path)
        item = path_parameters(self.item_path())
        table: list[tuple[Verb, str, str, Callable[[Request], Awaitable[JSONResponse]], JSON]] = [
            ("list", "GET", self.path, self.list, collection),
            ("create", "POST", self.path, self.create, collection),
            ("get", "GET", self.item_path(), self.get, item),
            ("update", "PUT", self.item_path(), self.update, item),
            ("patch", "PATCH", self.item_path(), self.patch, item),
            ("delete", "DELETE", self.item_path(), self.delete, item),
        ]
        for verb, method, path, endpoint, extra in table:
            if verb in self.verbs:
                router.add_api_route(
                    path,
                    endpoint,
                    methods=[method],
                    name=f"{self.name}_{verb}",
                    response_class=JSONResponse,
                    openapi_extra=extra,
                )
        return router


def parse_seed(model: type[M], entry: object, where: str) -> M:
    """A state-file entry validated against ``model``, refused as a :class:`SeedError` naming the entry."""
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        raise SeedError(f"{where}: {pointer_of(exc)[0]}") from None


def check_stamp(value: T, name: str, where: str) -> T:
    if value is not None and name.endswith(("_on", "_at", "_date")):
        try:
            parse_iso(str(value))
        except ValueError:
            raise SeedError(f"{where}: {value!r} is not an RFC 3339 timestamp") from None
    return value
