"""Cloudflare Tunnels (``cfd_tunnel``) of an account: the tunnels, their tokens, connections and remote configuration.

A tunnel: ``{id (UUID), account_tag, name, created_at, deleted_at, conns_active_at, conns_inactive_at, config_src,
remote_config, status, tun_type, connections, metadata}``. Create takes ``{name, config_src? ("local"), tunnel_secret?
(base64 of at least 32 bytes; generated when left out)}`` and answers the tunnel with its ``token`` (as cloudflared
reads it). Names are unique among live tunnels: 409/1013 (as cloudflared reports it). PATCH renames or changes the
secret. Deletion is soft: the tunnel keeps answering with ``deleted_at`` set, lists show it unless
``is_deleted=false``, and its name is free again; a tunnel with connectors refuses to go (400/1022, observed) unless
``cascade=true`` or its connections were deleted first.

``status`` follows the connectors: ``inactive`` before any, ``healthy`` while one is connected, ``degraded`` while
one of the connections is pending a reconnect (Cloudflare's "serving, but at least one connection has failed"; when
exactly Cloudflare says so is unverified), ``down`` once all left. Connectors are simulated through the admin API:
``POST /__emulator/tunnels/{tunnel_id}/connectors`` with ``{"connections"?: 4, "failed"?: 0, "version"?, "arch"?,
"colo"?}`` (``failed``: how many of its connections are pending a reconnect) answers ``{"client_id"}``; ``DELETE
.../connectors/{client_id}`` makes it leave. ``GET .../connections`` lists them (``config_version`` being the
configuration they run), ``DELETE .../connections[?client_id=]`` disconnects one or all. ``GET
/__emulator/tunnels/{tunnel_id}/configuration`` is the configuration as Cloudflare's edge sends it to the connectors:
the API's answer, read without a token or the account's rate limit (the edge's own reads are no API calls).

``GET .../token`` answers the token as a bare string: base64 of ``{"a": account tag, "t": tunnel ID, "s": secret}``.

``PUT .../configurations`` with ``{config: {ingress: [...], originRequest?, ...}}`` stores the tunnel's remote
configuration and makes it remotely managed; ``version`` grows by one with every PUT. Every rule has a ``service``
(``http(s)://``, ``tcp://``, ``ssh://``, ``rdp://``, ``unix:``, ``unix+tls:``, ``http_status:<code>``,
``hello_world``, ``bastion``, ``socks5``), a hostname that is a name or ``*.`` wildcard, a ``path`` that is a regular
expression; the last rule, and only it, matches everything (no hostname, or ``*``, and no path): "The last ingress
rule must match all URLs" (observed). ``GET`` answers the stored configuration, rules as they were sent (the SDK's
model wants a ``hostname`` on every rule, which a catch-all written without one lacks: unverified which is right).

List filters: ``name``, ``uuid``, ``is_deleted``, ``include_prefix``, ``exclude_prefix``, ``status``, ``existed_at``;
``page``/``per_page`` (default 20, 1..1000). Reading needs ``tunnels:read``, writing ``tunnels:edit``.

Unverified: the not-found code (404/1002), the refusal of a configuration (400/1055) or of a change to a deleted
tunnel (400/1014), what GET of the configuration answers before the first PUT (``config: null``, version 0), the page
bounds; ``was_active_at``/``was_inactive_at`` are not served; the 1,000-tunnel limit is not enforced.

State-file entries: ``{name, account_id?, id?, config_src?, tunnel_secret?, created_at?, deleted_at?,
configuration?: {version, config}}``.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import secrets
import uuid
from collections.abc import Iterable
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from app.emulator.admin import AdminError
from app.emulator.collection import Ctx, Kind, Unique, parse_seed
from app.emulator.context import emulator_of
from app.emulator.envelope import JSON, CloudflareError, invalid_body, ok, parse_model, read_json
from app.emulator.ids import now_iso, parse_iso
from app.emulator.paging import PageNumbers, PageSpec, Predicate, bool_param, combine, sort_by
from app.emulator.routes import route
from app.emulator.state import Obj, Store

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_SERVICE = re.compile(
    r"(https?|tcp|ssh|rdp|smb|unix|unix\+tls)://?\S+|http_status:[1-5]\d\d|hello_world|bastion|socks5"
)
_HOST_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def _duplicate(_obj: Obj) -> CloudflareError:
    return CloudflareError.single(
        409,
        1013,
        "You already have a tunnel with this name. Delete the existing tunnel, or choose a different name for your new "
        "tunnel",
    )


def _bad_config(message: str) -> CloudflareError:
    return CloudflareError.single(400, 1055, message)


class TunnelCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=255)
    config_src: Literal["local", "cloudflare"] = "local"
    tunnel_secret: str | None = None


class TunnelEdit(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(default=None, min_length=1, max_length=255)
    tunnel_secret: str | None = None


class ConfigBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    config: dict[str, JsonValue]


class TunnelSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    name: str
    config_src: Literal["local", "cloudflare"] = "local"
    tunnel_secret: str | None = None
    created_at: str | None = None
    deleted_at: str | None = None
    configuration: dict[str, JsonValue] | None = None


class ConnectorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    connections: int = Field(default=4, ge=1, le=16)
    failed: int = Field(default=0, ge=0, le=16)
    version: str = "2025.1.0"
    arch: str = "linux_amd64"
    colo: str = "ams"


def _secret(given: str | None) -> str:
    if given is None:
        return base64.b64encode(secrets.token_bytes(32)).decode()
    try:
        decoded = base64.b64decode(given, validate=True)
    except ValueError:
        raise invalid_body("tunnel_secret must be base64", pointer="/tunnel_secret") from None
    if len(decoded) < 32:
        raise invalid_body("tunnel_secret must hold at least 32 bytes", pointer="/tunnel_secret")
    return given


def check_ingress(config: object) -> None:
    """Refuse an ingress document cloudflared could not run."""
    if not isinstance(config, dict):
        raise _bad_config("config must be an object")
    rules = config.get("ingress")
    if not isinstance(rules, list) or not rules:
        raise _bad_config("The last ingress rule must match all URLs")
    for index, rule in enumerate(rules, start=1):
        if not isinstance(rule, dict):
            raise _bad_config(f"Ingress rule #{index} must be an object")
        service = rule.get("service")
        if not isinstance(service, str) or not _SERVICE.fullmatch(service):
            raise _bad_config(f"Ingress rule #{index} has an invalid service {service!r}")
        hostname, path = rule.get("hostname"), rule.get("path")
        if hostname not in (None, "", "*"):
            name = str(hostname).lower().removeprefix("*.")
            if not all(_HOST_LABEL.fullmatch(label) for label in name.split(".")):
                raise _bad_config(f"Ingress rule #{index} has an invalid hostname {hostname!r}")
        if path not in (None, ""):
            try:
                re.compile(str(path))
            except re.error as exc:
                raise _bad_config(f"Ingress rule #{index} has an invalid path: {exc}") from None
        catch_all = hostname in (None, "", "*") and path in (None, "")
        if catch_all and index != len(rules):
            raise _bad_config(f"Rule #{index} is matching all URLs but is not the last rule")
        if not catch_all and index == len(rules):
            raise _bad_config("The last ingress rule must match all URLs")


class Tunnels(Kind):
    name = "tunnels"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/cfd_tunnel"
    scope_param = "account_id"
    item_param = "tunnel_id"
    resource = "tunnels"
    verbs = frozenset({"list", "create", "get", "patch"})
    paging = PageNumbers(PageSpec(default=20, minimum=1, maximum=1000))
    unique = (Unique(("name", "live"), _duplicate),)
    create_body = TunnelCreate
    patch_body = TunnelEdit
    stamps = ("created_at",)
    hidden = ("secret", "connectors", "configuration", "live", "was_active")

    def new_id(self) -> str:
        return str(uuid.uuid4())

    def valid_id(self, value: str) -> bool:
        return _UUID.fullmatch(value) is not None

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 1002, "Tunnel not found")

    def admit(self, store: Store, parent: Obj | None, parent_key: str | None, obj: Obj, previous: Obj | None) -> None:
        if obj["live"]:
            super().admit(store, parent, parent_key, obj, previous)

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        if previous is not None:
            assert isinstance(body, TunnelEdit)
            if not previous["live"]:
                raise CloudflareError.single(400, 1014, "The tunnel is deleted")
            changed = {**previous}
            if body.name is not None:
                changed["name"] = body.name
            if body.tunnel_secret is not None:
                changed["secret"] = _secret(body.tunnel_secret)
            return changed
        assert isinstance(body, TunnelCreate)
        assert parent is not None
        return {
            "id": self.new_id(),
            "account_tag": parent["id"],
            "name": body.name,
            "created_at": now_iso(),
            "deleted_at": None,
            "conns_active_at": None,
            "conns_inactive_at": None,
            "config_src": body.config_src,
            "remote_config": body.config_src == "cloudflare",
            "status": "inactive",
            "tun_type": "cfd_tunnel",
            "metadata": {},
            "secret": _secret(body.tunnel_secret),
            "connectors": [],
            "configuration": None,
            "live": True,
            "was_active": False,
        }

    def render(self, ctx: Ctx, obj: Obj) -> Obj:
        shown: Obj = super().render(ctx, obj)
        shown["connections"] = [
            {**conn, "client_id": connector["id"], "client_version": connector["version"]}
            for connector in obj["connectors"]
            for conn in connector["conns"]
        ]
        return shown

    def filters(self, ctx: Ctx) -> Predicate[Obj]:
        query = ctx.query
        predicates: list[Predicate[Obj]] = []
        deleted = bool_param(query, "is_deleted")
        if deleted is not None:
            predicates.append(lambda t: (not t["live"]) is deleted)
        for field in ("name", "status"):
            if query.get(field):
                predicates.append(_equals(field, query[field]))
        if query.get("uuid"):
            wanted_id = query["uuid"]
            predicates.append(lambda t: t["id"] == wanted_id)
        if query.get("include_prefix"):
            prefix = query["include_prefix"]
            predicates.append(lambda t: t["name"].startswith(prefix))
        if query.get("exclude_prefix"):
            excluded = query["exclude_prefix"]
            predicates.append(lambda t: not t["name"].startswith(excluded))
        if query.get("existed_at"):
            try:
                moment = parse_iso(query["existed_at"])
            except ValueError:
                raise invalid_body("existed_at is a timestamp", pointer="/existed_at") from None
            predicates.append(
                lambda t: (
                    parse_iso(t["created_at"]) <= moment
                    and (t["deleted_at"] is None or parse_iso(t["deleted_at"]) > moment)
                )
            )
        return combine(predicates, "all")

    def order(self, ctx: Ctx, items: Iterable[Obj]) -> list[Obj]:
        return sort_by(items, lambda t: (t["created_at"], t["id"]), "asc")

    def created(self, ctx: Ctx, obj: Obj) -> Obj:
        return {**self.render(ctx, obj), "token": token_of(obj)}

    # Connectors

    def _refresh(self, tunnel: Obj) -> None:
        now = now_iso()
        active = any(connector["conns"] for connector in tunnel["connectors"])
        failing = any(conn["is_pending_reconnect"] for connector in tunnel["connectors"] for conn in connector["conns"])
        if active:
            if tunnel["status"] not in ("healthy", "degraded"):
                tunnel["conns_active_at"] = now
            tunnel.update(status="degraded" if failing else "healthy", was_active=True)
        elif tunnel["was_active"]:
            if tunnel["status"] != "down":
                tunnel["conns_inactive_at"] = now
            tunnel["status"] = "down"

    def _connector(self, tunnel: Obj, spec: ConnectorSpec) -> Obj:
        client_id = str(uuid.uuid4())
        opened = now_iso()
        conns = [
            {
                "id": str(uuid.uuid4()),
                "uuid": str(uuid.uuid4()),
                "colo_name": f"{spec.colo}{index + 1:02}",
                "is_pending_reconnect": index < spec.failed,
                "opened_at": opened,
                "origin_ip": f"198.51.100.{10 + index}",
            }
            for index in range(spec.connections)
        ]
        return {
            "id": client_id,
            "arch": spec.arch,
            "version": spec.version,
            "run_at": opened,
            "features": [],
            "conns": conns,
        }

    def _connections(self, tunnel: Obj) -> list[JsonValue]:
        version = (tunnel["configuration"] or {}).get("version", 0)
        return [{**copy.deepcopy(connector), "config_version": version} for connector in tunnel["connectors"]]

    # Endpoints

    def extra_routes(self, router: APIRouter) -> None:
        item = self.item_path()
        route(router, "DELETE", item, "tunnels_delete", self.soft_delete)
        route(router, "GET", f"{item}/token", "tunnels_token", self.token)
        route(router, "GET", f"{item}/connections", "tunnels_connections", self.list_connections)
        route(router, "DELETE", f"{item}/connections", "tunnels_disconnect", self.disconnect)
        route(router, "GET", f"{item}/configurations", "tunnels_configuration_get", self.get_configuration)
        route(router, "PUT", f"{item}/configurations", "tunnels_configuration_put", self.put_configuration)

    async def _tunnel(self, request: Request, level: Literal["read", "edit"]) -> tuple[Ctx, Obj]:
        emulator, principal = await self.principal(request)
        ctx = self.context(emulator, principal, request)
        self.require(ctx, level)
        return ctx, self.reach(ctx, ctx.param("tunnel_id"))

    async def soft_delete(self, request: Request) -> JSONResponse:
        ctx, tunnel = await self._tunnel(request, "edit")
        if tunnel["live"]:
            if tunnel["connectors"] and not bool_param(ctx.query, "cascade"):
                raise CloudflareError.single(400, 1022, "Cannot delete tunnel because it has active connections")
            tunnel["connectors"] = []
            self._refresh(tunnel)
            tunnel.update(live=False, deleted_at=now_iso())
        return ok(self.render(ctx, tunnel))

    async def token(self, request: Request) -> JSONResponse:
        _ctx, tunnel = await self._tunnel(request, "read")
        return ok(token_of(tunnel))

    async def list_connections(self, request: Request) -> JSONResponse:
        _ctx, tunnel = await self._tunnel(request, "read")
        return ok(self._connections(tunnel))

    async def disconnect(self, request: Request) -> JSONResponse:
        ctx, tunnel = await self._tunnel(request, "edit")
        client_id = ctx.query.get("client_id")
        tunnel["connectors"] = [c for c in tunnel["connectors"] if client_id is not None and c["id"] != client_id]
        self._refresh(tunnel)
        return ok({})

    async def get_configuration(self, request: Request) -> JSONResponse:
        _ctx, tunnel = await self._tunnel(request, "read")
        return ok(_configuration(tunnel))

    async def put_configuration(self, request: Request) -> JSONResponse:
        raw = await read_json(request)
        _ctx, tunnel = await self._tunnel(request, "edit")
        if not tunnel["live"]:
            raise CloudflareError.single(400, 1014, "The tunnel is deleted")
        body = parse_model(ConfigBody, raw)
        check_ingress(body.config)
        version = (tunnel["configuration"] or {}).get("version", 0) + 1
        tunnel["configuration"] = {"version": version, "config": copy.deepcopy(body.config), "created_at": now_iso()}
        tunnel.update(config_src="cloudflare", remote_config=True)
        return ok(_configuration(tunnel))

    def admin_routes(self, router: APIRouter) -> None:
        router.add_api_route("/tunnels/{tunnel_id}/connectors", self.connect, methods=["POST"])
        router.add_api_route("/tunnels/{tunnel_id}/connectors/{client_id}", self.leave, methods=["DELETE"])
        router.add_api_route("/tunnels/{tunnel_id}/configuration", self.edge_configuration, methods=["GET"])

    def _admin_tunnel(self, request: Request, tunnel_id: str) -> Obj:
        tunnel = self.table(emulator_of(request).store).get(tunnel_id)
        if tunnel is None:
            raise AdminError(f"no tunnel {tunnel_id}", 404)
        return tunnel

    async def connect(self, tunnel_id: str, request: Request) -> JSONResponse:
        raw = await request.body()
        tunnel = self._admin_tunnel(request, tunnel_id)
        if not tunnel["live"]:
            raise AdminError(f"tunnel {tunnel_id} is deleted")
        try:
            spec = ConnectorSpec.model_validate(json.loads(raw) if raw.strip() else {})
        except ValueError as exc:
            raise AdminError(f"not a connector: {exc}") from None
        connector = self._connector(tunnel, spec)
        tunnel["connectors"].append(connector)
        self._refresh(tunnel)
        return JSONResponse({"client_id": connector["id"], "status": tunnel["status"]})

    async def edge_configuration(self, tunnel_id: str, request: Request) -> JSONResponse:
        return JSONResponse(_configuration(self._admin_tunnel(request, tunnel_id)))

    async def leave(self, tunnel_id: str, client_id: str, request: Request) -> JSONResponse:
        tunnel = self._admin_tunnel(request, tunnel_id)
        before = len(tunnel["connectors"])
        tunnel["connectors"] = [c for c in tunnel["connectors"] if c["id"] != client_id]
        if len(tunnel["connectors"]) == before:
            raise AdminError(f"no connector {client_id} on tunnel {tunnel_id}", 404)
        self._refresh(tunnel)
        return JSONResponse({"client_id": client_id, "status": tunnel["status"]})

    # State file

    def seed(self, store: Store, entry: JSON, parent: Obj | None, parent_key: str | None, where: str) -> Obj:
        seed = parse_seed(TunnelSeed, {k: v for k, v in entry.items() if k != "account_id"}, where)
        tunnel = self.build(store, parent, TunnelCreate(name=seed.name, config_src=seed.config_src), None, False)
        tunnel["secret"] = _secret(seed.tunnel_secret)
        if seed.id is not None:
            if not self.valid_id(seed.id):
                raise invalid_body(f"{seed.id!r} is not a tunnel ID")
            tunnel["id"] = seed.id
        if seed.created_at is not None:
            tunnel["created_at"] = seed.created_at
        if seed.deleted_at is not None:
            tunnel.update(deleted_at=seed.deleted_at, live=False)
        if seed.configuration is not None:
            check_ingress(seed.configuration.get("config"))
            version = seed.configuration.get("version", 1)
            if not isinstance(version, str | int | float):
                raise invalid_body("configuration.version is a number")
            tunnel["configuration"] = {
                "version": int(version),
                "config": seed.configuration["config"],
                "created_at": seed.configuration.get("created_at") or tunnel["created_at"],
            }
            tunnel.update(config_src="cloudflare", remote_config=True)
        table = self.table(store)
        self.admit(store, parent, parent_key, tunnel, table.get(tunnel["id"]))
        return table.add(tunnel, parent_key)

    def dump(self, store: Store, obj: Obj, parent_key: str | None) -> JSON:
        return {
            "account_id": parent_key,
            "id": obj["id"],
            "name": obj["name"],
            "config_src": obj["config_src"],
            "tunnel_secret": obj["secret"],
            "created_at": obj["created_at"],
            "deleted_at": obj["deleted_at"],
            "configuration": obj["configuration"],
        }


def token_of(tunnel: Obj) -> str:
    payload = {"a": tunnel["account_tag"], "t": tunnel["id"], "s": tunnel["secret"]}
    return base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def _configuration(tunnel: Obj) -> Obj:
    stored = tunnel["configuration"] or {"version": 0, "config": None, "created_at": tunnel["created_at"]}
    return {
        "tunnel_id": tunnel["id"],
        "account_id": tunnel["account_tag"],
        "version": stored["version"],
        "config": copy.deepcopy(stored["config"]),
        "source": "cloudflare",
        "created_at": stored["created_at"],
    }


KIND = Tunnels()


def _equals(field: str, wanted: str) -> Predicate[Obj]:
    """A predicate of its own per field: a lambda in the loop would see the loop's last field and value."""
    return lambda t: bool(t[field] == wanted)
