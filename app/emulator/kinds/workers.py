"""Workers scripts of an account and the routes of a zone that run them.

Scripts are addressed by name and uploaded whole: ``PUT /accounts/{account_id}/workers/scripts/{name}`` with a
``multipart/form-data`` body holding a ``metadata`` JSON part and one part per module, named by its filename (the part
name is the fallback). The metadata names the entry point: ``main_module`` (module format) or ``body_part``
(service-worker format); it carries ``compatibility_date`` (default 2021-11-02, the oldest) and
``compatibility_flags``, ``bindings``, ``keep_bindings`` (binding types to carry over from the last upload), and
``usage_model``, ``logpush``, ``tags``. The upload is an upsert: a new name creates a Worker (at most 100 per account
on the Free plan), a known one is replaced, keeping its ``created_on`` and ``tag``. ``etag`` is a hash of the code
alone; ``modified_on`` changes with every upload and every settings change, which is how a change made outside a
client shows.

Bindings are checked: ``plain_text`` and ``secret_text`` need ``text``, ``kv_namespace`` a ``namespace_id`` of the
account (400/10042 "KV namespace '...' is not valid.", as wrangler reports it), ``r2_bucket`` a ``bucket_name`` of the
account in its ``jurisdiction``, ``d1`` a ``database_id`` (or ``id``) of the account; names are unique. Other binding
types are kept as sent. A ``secret_text`` value is never shown again: the settings answer names the binding only.

Endpoints: the upload; ``GET .../scripts`` (single page, with ``modified_on``, ``etag`` and the Worker's routes);
``GET .../scripts/{name}`` (the code: the body part of a service worker, a form of the modules otherwise);
``GET``/``PATCH .../scripts/{name}/settings`` (PATCH takes a form with one JSON ``settings`` part, or that object as
JSON; a ``secret_text`` binding sent without ``text`` keeps its value); ``DELETE .../scripts/{name}``. Reading needs
``workers_scripts:read``, writing ``workers_scripts:edit``. Errors (Workers API codes): 404/10007 unknown script,
400/10021 validation (no such module, no entry point, bad binding or compatibility date), 400/10027 code over 3 MiB
(the Free size), 400/10001 a body that is not a form.

The routes of a zone that run a Worker are served by ``app.emulator.kinds.worker_routes``.

Unverified: the codes for the Worker count limit (10037), an invalid name (10016), a pattern outside the zone
(10022), a route not found (404/10007) and a duplicate pattern's status (409); that deleting a Worker deletes its
routes (it does here); the Free size limit (3 MiB, counted uncompressed here); that R2 and D1 binding errors use
10021.

State-file entries (``workers_scripts``): ``{id (the name), account_id?, metadata, modules: [{name, content_type?,
content? | content_base64?}], created_on?, modified_on?, tag?}``; ``worker_routes``: ``{pattern, script?, zone_id}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Sequence
from datetime import date
from typing import TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from app.emulator.collection import Ctx, Kind, parse_seed
from app.emulator.envelope import JSON, CloudflareError, invalid_body, ok, pointer_of, read_json
from app.emulator.ids import new_id, now_iso
from app.emulator.multipart import Part, is_multipart, parse_form
from app.emulator.paging import sort_by
from app.emulator.routes import route
from app.emulator.state import Obj, Store

FREE_WORKERS = 100
FREE_SIZE = 3 * 1024 * 1024
OLDEST_COMPATIBILITY_DATE = "2021-11-02"
_NAME = re.compile(r"[a-z0-9_-]{1,63}")
_SHOWN_SETTINGS = ("compatibility_date", "compatibility_flags", "logpush", "tags", "tail_consumers", "usage_model")
M = TypeVar("M", bound=BaseModel)


def _invalid(message: str) -> CloudflareError:
    return CloudflareError.single(400, 10021, message)


def script_not_found() -> CloudflareError:
    return CloudflareError.single(404, 10007, "workers.api.error.script_not_found")


class Binding(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(min_length=1)
    name: str = Field(min_length=1)


class Metadata(BaseModel):
    model_config = ConfigDict(extra="ignore")

    main_module: str | None = None
    body_part: str | None = None
    compatibility_date: str | None = None
    compatibility_flags: list[str] = []
    bindings: list[Binding] = []
    keep_bindings: list[str] = []
    usage_model: str = "standard"
    logpush: bool = False
    tags: list[str] = []
    tail_consumers: list[dict[str, JsonValue]] = []


class Module(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    content_type: str = "application/javascript+module"
    content: str | None = None
    content_base64: str | None = None

    def data(self) -> bytes:
        return (
            base64.b64decode(self.content_base64) if self.content_base64 is not None else (self.content or "").encode()
        )


class ScriptSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    account_id: str | None = None
    metadata: Metadata
    modules: list[Module]
    created_on: str | None = None
    modified_on: str | None = None
    tag: str | None = None


def _parse(model: type[M], raw: object) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise _invalid(pointer_of(exc)[0]) from None


def _check_date(value: str | None) -> str:
    if value is None:
        return OLDEST_COMPATIBILITY_DATE
    try:
        moment = date.fromisoformat(value)
    except ValueError:
        raise _invalid(f"Compatibility date {value!r} is not a date (YYYY-MM-DD).") from None
    if moment > date.today():
        raise _invalid(f"Compatibility date {value} is in the future.")
    return value


class WorkerScripts(Kind):
    name = "workers_scripts"
    refers_to = ("kv_namespaces", "r2_buckets", "d1_databases")
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/workers/scripts"
    scope_param = "account_id"
    item_param = "script_name"
    resource = "workers_scripts"
    verbs = frozenset({"list", "delete"})
    limit = FREE_WORKERS
    stamps = ("created_on", "modified_on")
    hidden = ("metadata", "modules")
    summary_fields = ("etag",)

    def valid_id(self, value: str) -> bool:
        return bool(value)

    def key_of(self, obj: Obj, parent_key: str | None) -> str:
        return f"{parent_key}/{obj['id']}"

    def key_for(self, ctx: Ctx, ident: str) -> str:
        return f"{ctx.parent_key}/{ident}"

    def not_found(self) -> CloudflareError:
        return script_not_found()

    def over_limit(self, parent: Obj | None, limit: int) -> CloudflareError:
        return CloudflareError.single(400, 10037, f"You have exceeded the limit of {limit} Workers on your account.")

    # The script itself

    def compose(
        self,
        store: Store,
        account_key: str,
        name: str,
        metadata: Metadata,
        modules: Sequence[Module],
        previous: Obj | None,
    ) -> Obj:
        """The Worker an upload makes: its modules checked against the metadata, its bindings against the account."""
        if not _NAME.fullmatch(name):
            raise CloudflareError.single(400, 10016, f"Invalid Worker name {name!r}: use a-z, 0-9, '-' and '_'.")
        if sum(len(module.data()) for module in modules) > FREE_SIZE:
            raise CloudflareError.single(400, 10027, f"Script body was too large: the limit is {FREE_SIZE} bytes.")
        entry = metadata.main_module or metadata.body_part
        if entry is None:
            raise _invalid("The metadata must name the entry point: main_module or body_part.")
        names = [module.name for module in modules]
        if entry not in names:
            raise _invalid(f'No such module "{entry}".')
        if len(set(names)) != len(names):
            raise _invalid("Two parts have the same name.")
        bindings = self._bindings(store, account_key, metadata, previous)
        code = b"".join(module.name.encode() + b"\0" + module.data() for module in modules)
        now = now_iso()
        stored_metadata = {**metadata.model_dump(exclude={"keep_bindings"}), "bindings": bindings}
        return {
            "id": name,
            "tag": previous["tag"] if previous else new_id(),
            "etag": hashlib.sha256(code).hexdigest(),
            "created_on": previous["created_on"] if previous else now,
            "modified_on": now,
            "compatibility_date": _check_date(metadata.compatibility_date),
            "compatibility_flags": list(metadata.compatibility_flags),
            "usage_model": metadata.usage_model,
            "logpush": metadata.logpush,
            "tags": list(metadata.tags),
            "tail_consumers": list(metadata.tail_consumers),
            "handlers": ["fetch"],
            "has_modules": metadata.main_module is not None,
            "has_assets": False,
            "last_deployed_from": "api",
            "startup_time_ms": 0,
            "metadata": stored_metadata,
            "modules": [
                {
                    "name": m.name,
                    "content_type": m.content_type,
                    "content_base64": base64.b64encode(m.data()).decode(),
                }
                for m in modules
            ],
        }

    def _bindings(
        self, store: Store, account_key: str, metadata: Metadata, previous: Obj | None
    ) -> list[dict[str, JsonValue]]:
        given = [binding.model_dump() for binding in metadata.bindings]
        if previous is not None and metadata.keep_bindings:
            sent = {binding["name"] for binding in given}
            kept = [
                binding
                for binding in previous["metadata"]["bindings"]
                if binding["type"] in metadata.keep_bindings and binding["name"] not in sent
            ]
            given += kept
        return self.check_bindings(store, account_key, given, previous)

    def check_bindings(
        self, store: Store, account_key: str, bindings: list[dict[str, JsonValue]], previous: Obj | None
    ) -> list[dict[str, JsonValue]]:
        names = [binding["name"] for binding in bindings]
        if len(set(names)) != len(names):
            raise _invalid("Binding names must be unique within a Worker.")
        old_secrets = {
            b["name"]: b.get("text")
            for b in (previous["metadata"]["bindings"] if previous else [])
            if b["type"] == "secret_text"
        }
        checked = []
        for binding in bindings:
            kind, name = binding["type"], binding["name"]
            if kind == "secret_text" and "text" not in binding and name in old_secrets:
                binding = {**binding, "text": old_secrets[name]}
            if kind in ("plain_text", "secret_text") and not isinstance(binding.get("text"), str):
                raise _invalid(f"Binding {name!r} of type {kind} needs text.")
            if kind == "kv_namespace":
                namespace_id = str(binding.get("namespace_id") or "")
                namespace = store.table("kv_namespaces").get(namespace_id)
                if namespace is None or store.table("kv_namespaces").parent_id(namespace_id) != account_key:
                    raise CloudflareError.single(400, 10042, f"KV namespace '{namespace_id}' is not valid.")
            if kind == "r2_bucket":
                jurisdiction = binding.get("jurisdiction") or "default"
                bucket = binding.get("bucket_name")
                if store.table("r2_buckets").get(f"{account_key}/{jurisdiction}/{bucket}") is None:
                    raise _invalid(f"R2 bucket '{bucket}' (jurisdiction {jurisdiction}) of binding {name!r} not found.")
            if kind == "d1":
                database_id = str(binding.get("database_id") or binding.get("id") or "")
                databases = store.table("d1_databases")
                if databases.get(database_id) is None or databases.parent_id(database_id) != account_key:
                    raise _invalid(f"D1 database '{database_id}' of binding {name!r} not found.")
            checked.append(binding)
        return checked

    # Endpoints

    def extra_routes(self, router: APIRouter) -> None:
        item = self.item_path()
        route(router, "PUT", item, "workers_scripts_upload", self.upload)
        route(router, "GET", item, "workers_scripts_content", self.content, response_class=Response)
        route(router, "GET", f"{item}/settings", "workers_scripts_settings_get", self.get_settings)
        route(router, "PATCH", f"{item}/settings", "workers_scripts_settings_patch", self.patch_settings)

    async def upload(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        content_type = request.headers.get("content-type", "")
        raw = await request.body()
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        assert ctx.parent_key is not None
        parts = parse_form(content_type, raw)
        meta_part = next((p for p in parts if p.name == "metadata"), None)
        if meta_part is None:
            raise _invalid("The form has no metadata part.")
        try:
            metadata = _parse(Metadata, json.loads(meta_part.data or b"{}"))
        except ValueError:
            raise _invalid("The metadata part is not JSON.") from None
        modules = [_module(p) for p in parts if p is not meta_part]
        name = ctx.param("script_name")
        table = self.table(ctx.store)
        key = self.key_for(ctx, name)
        previous = table.get(key)
        script = self.compose(ctx.store, ctx.parent_key, name, metadata, modules, previous)
        self.admit(ctx.store, ctx.parent, ctx.parent_key, script, previous)
        table.add(script, ctx.parent_key, key=key)
        return ok(self.render(ctx, script))

    async def content(self, request: Request) -> Response:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        script = self.reach(ctx, ctx.param("script_name"))
        modules = script["modules"]
        if not script["has_modules"]:
            entry = next(m for m in modules if m["name"] == script["metadata"]["body_part"])
            return Response(base64.b64decode(entry["content_base64"]), media_type="application/javascript")
        boundary = "kflare-emulator-" + script["etag"][:16]
        chunks = []
        for module in modules:
            chunks.append(
                f'--{boundary}\r\nContent-Disposition: form-data; name="{module["name"]}"; '
                f'filename="{module["name"]}"\r\nContent-Type: {module["content_type"]}\r\n\r\n'.encode()
                + base64.b64decode(module["content_base64"])
                + b"\r\n"
            )
        body = b"".join(chunks) + f"--{boundary}--\r\n".encode()
        return Response(body, media_type=f"multipart/form-data; boundary={boundary}")

    async def get_settings(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        return ok(_settings(self.reach(ctx, ctx.param("script_name"))))

    async def patch_settings(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        content_type = request.headers.get("content-type", "")
        if is_multipart(content_type):
            raw_body = await request.body()
            part = next((p for p in parse_form(content_type, raw_body) if p.name == "settings"), None)
            try:
                raw: JsonValue = json.loads(part.data) if part is not None else {}
            except ValueError:
                raise _invalid("The settings part is not JSON.") from None
        else:
            body = await read_json(request)
            raw = body.get("settings", body) if isinstance(body, dict) else body
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "edit")
        assert ctx.parent_key is not None
        script = self.reach(ctx, ctx.param("script_name"))
        if not isinstance(raw, dict):
            raise invalid_body("settings is an object")
        changes = _parse(SettingsPatch, raw).model_dump(exclude_unset=True)
        metadata = dict(script["metadata"])
        if "bindings" in changes:
            metadata["bindings"] = self.check_bindings(ctx.store, ctx.parent_key, changes.pop("bindings"), script)
        if "compatibility_date" in changes:
            changes["compatibility_date"] = _check_date(changes["compatibility_date"])
        metadata.update(changes)
        updated = {**script, **changes, "metadata": metadata, "modified_on": now_iso()}
        self.table(ctx.store).add(updated, ctx.parent_key, key=self.key_for(ctx, script["id"]))
        return ok(_settings(updated))

    def list_render(self, ctx: Ctx, obj: Obj) -> Obj:
        account = ctx.parent_key
        routes = [
            {"id": r["id"], "pattern": r["pattern"], "script": r["script"]}
            for zone in ctx.store.zones.under(str(account))
            for r in ctx.store.table("worker_routes").under(zone["id"])
            if r.get("script") == obj["id"]
        ]
        return {**self.render(ctx, obj), "routes": routes}

    async def list(self, request: Request) -> JSONResponse:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, "read")
        scripts = sort_by(self.rows(ctx), lambda s: s["id"], "asc")
        return ok([self.list_render(ctx, script) for script in scripts])

    def deleted(self, obj: Obj) -> JsonValue:
        return None

    def after_delete(self, ctx: Ctx, obj: Obj) -> None:
        routes = ctx.store.table("worker_routes")
        for zone in ctx.store.zones.under(str(ctx.parent_key)):
            for route_obj in routes.under(zone["id"]):
                if route_obj.get("script") == obj["id"]:
                    routes.remove(route_obj["id"])

    # State file

    def seed(self, store: Store, entry: JSON, parent: Obj | None, parent_key: str | None, where: str) -> Obj:
        seed = parse_seed(ScriptSeed, entry, where)
        assert parent_key is not None
        table = self.table(store)
        key = f"{parent_key}/{seed.id}"
        script = self.compose(store, parent_key, seed.id, seed.metadata, seed.modules, table.get(key))
        for stamp, value in (("created_on", seed.created_on), ("modified_on", seed.modified_on), ("tag", seed.tag)):
            if value is not None:
                script[stamp] = value
        self.admit(store, parent, parent_key, script, table.get(key))
        return table.add(script, parent_key, key=key)

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        return {
            "id": obj["id"],
            "account_id": parent_key,
            "metadata": obj["metadata"],
            "modules": obj["modules"],
            "created_on": obj["created_on"],
            "modified_on": obj["modified_on"],
            "tag": obj["tag"],
        }


class SettingsPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    compatibility_date: str | None = None
    compatibility_flags: list[str] | None = None
    bindings: list[Binding] | None = None
    usage_model: str | None = None
    logpush: bool | None = None
    tags: list[str] | None = None
    tail_consumers: list[dict[str, JsonValue]] | None = None


def _module(part: Part) -> Module:
    return Module(
        name=part.filename or part.name,
        content_type=part.content_type,
        content_base64=base64.b64encode(part.data).decode(),
    )


def _settings(script: Obj) -> Obj:
    bindings = [
        {k: v for k, v in binding.items() if not (binding["type"] == "secret_text" and k == "text")}
        for binding in script["metadata"]["bindings"]
    ]
    return {"bindings": bindings, **{name: script[name] for name in _SHOWN_SETTINGS}}


SCRIPTS = WorkerScripts()
