"""WorkerScript and WorkerRoute: a Worker of an account, and the routes of a zone that run it."""

from __future__ import annotations

from typing import Annotated, Final, Literal, Self

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems, wire_name
from app.api.meta import Status
from app.api.refs import AccountReference, BoundObjectReference, KeyReference, LocalObjectReference, Refers
from app.api.resource import Resource
from app.api.text import CODE_SCHEMA, NAME_SCHEMA, CodeCheck, NameCheck

WORKER_NAME_PATTERN = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"
BINDING_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
ROUTE_PATTERN = r"^\*?[A-Za-z0-9.-]+(/\S*)?$"
SCRIPT_SIZE_LIMIT: Final = 3 * 1024 * 1024
"""Cloudflare's limit on a Worker's code on the Free plan (3 MiB), in bytes."""
MAX_BINDINGS: Final = 64
SOURCE_FIELDS: Final = (
    "plain_text",
    "secret_key_ref",
    "kv_namespace_ref",
    "kv_namespace_id",
    "r2_bucket_ref",
    "r2_bucket_name",
    "d1_database_ref",
)
BINDING_SOURCES: Final = tuple(wire_name(f) for f in SOURCE_FIELDS)
CloudflareValue = Annotated[str, Field(max_length=256)]


def too_large(size: int) -> str:
    return (
        f"the script is {size} bytes, over Cloudflare's limit of {SCRIPT_SIZE_LIMIT} bytes"
        f" ({SCRIPT_SIZE_LIMIT // (1024 * 1024)} MiB on the Free plan)"
    )


def _exactly_one_rule(fields: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"has(self.{f})" for f in fields) + "].filter(x, x).size() == 1"


Flag = Annotated[str, Field(max_length=128, json_schema_extra=NAME_SCHEMA), NameCheck]


class WorkerBinding(KflareModel):
    """A binding: a name the Worker reads, and exactly one source of its value."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": _exactly_one_rule(BINDING_SOURCES),
                    "message": "a binding needs exactly one of " + ", ".join(BINDING_SOURCES),
                }
            ]
        }
    )

    name: Annotated[str, Field(min_length=1, max_length=255, pattern=BINDING_NAME_PATTERN)]
    """The name the Worker sees (`env.NAME`)."""
    plain_text: (
        Annotated[str, Field(min_length=1, max_length=5120, json_schema_extra=CODE_SCHEMA), CodeCheck] | None
    ) = None
    """A plain-text value."""
    secret_key_ref: Annotated[KeyReference, Refers("Secret")] | None = None
    """A Secret key in the same namespace, bound as a secret; its value is never written anywhere but Cloudflare."""
    kv_namespace_ref: Annotated[BoundObjectReference, Refers("KVNamespace")] | None = None
    """A KVNamespace in the same namespace, or in another whose Grant allows it (preferred over an ID)."""
    kv_namespace_id: (
        Annotated[str, Field(min_length=1, max_length=64, json_schema_extra=NAME_SCHEMA), NameCheck] | None
    ) = None
    """The ID of a KV namespace kflare does not manage."""
    r2_bucket_ref: Annotated[BoundObjectReference, Refers("R2Bucket")] | None = None
    """An R2Bucket in the same namespace, or in another whose Grant allows it."""
    r2_bucket_name: (
        Annotated[str, Field(min_length=1, max_length=63, json_schema_extra=NAME_SCHEMA), NameCheck] | None
    ) = None
    """The name of an R2 bucket kflare does not manage (default jurisdiction)."""
    d1_database_ref: Annotated[BoundObjectReference, Refers("D1Database")] | None = None
    """A D1Database in the same namespace, or in another whose Grant allows it."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        given = [wire_name(f) for f in SOURCE_FIELDS if getattr(self, f) is not None]
        if len(given) != 1:
            problems = Problems()
            found = ", ".join(given) if given else "none"
            problems.add((), f"a binding needs exactly one of {', '.join(BINDING_SOURCES)} (found: {found})")
            problems.raise_if_any("WorkerBinding")
        return self

    @property
    def source(self) -> str:
        """The python name of the field that gives the value."""
        return next(f for f in SOURCE_FIELDS if getattr(self, f) is not None)


class WorkerScriptSpec(KflareModel):
    """The Worker: its name in the account, its code (inline or from a ConfigMap), settings and bindings."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.script) != has(self.scriptConfigMapRef)",
                    "message": "exactly one of script or scriptConfigMapRef must be set",
                }
            ]
        }
    )

    name: Annotated[str, Field(min_length=1, max_length=63, pattern=WORKER_NAME_PATTERN)]
    """The Worker's name in Cloudflare."""
    account_ref: AccountReference
    """The CloudflareAccount the Worker belongs to."""
    script: Annotated[str, Field(min_length=1, json_schema_extra=CODE_SCHEMA), CodeCheck] | None = None
    """The code, inline (at most 3 MiB)."""
    script_config_map_ref: Annotated[KeyReference, Refers("ConfigMap")] | None = None
    """A ConfigMap key in the same namespace holding the code."""
    format: Literal["module", "serviceWorker"] = "module"
    """`module` (ES modules, `export default { fetch }`) or `serviceWorker` (`addEventListener('fetch', ...)`)."""
    compatibility_date: Annotated[str, Field(pattern=DATE_PATTERN)] | None = None
    """The Workers runtime compatibility date (YYYY-MM-DD)."""
    compatibility_flags: (
        Annotated[
            list[Annotated[str, Field(max_length=128, json_schema_extra=NAME_SCHEMA), NameCheck]], Field(max_length=64)
        ]
        | None
    ) = None
    """Workers runtime compatibility flags."""
    bindings: (
        Annotated[
            list[WorkerBinding],
            Field(
                max_length=MAX_BINDINGS,
                json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            ),
        ]
        | None
    ) = None
    """Bindings, by name."""

    @field_validator("script")
    @classmethod
    def _check_size(cls, script: str | None) -> str | None:
        if script is not None:
            size = len(script.encode())
            if size > SCRIPT_SIZE_LIMIT:
                raise PydanticCustomError("script_size", too_large(size))
        return script

    @model_validator(mode="after")
    def _check(self) -> Self:
        problems = Problems()
        if (self.script is None) == (self.script_config_map_ref is None):
            problems.add((), "exactly one of script or scriptConfigMapRef must be set")
        names = [b.name for b in self.bindings or []]
        for index, name in enumerate(names):
            if name in names[:index]:
                problems.add(("bindings", index, "name"), f"binding {name!r} is listed twice")
        problems.raise_if_any(type(self).__name__)
        return self


class WorkerScriptMetadata(KflareModel):
    """What Cloudflare reported of the Worker."""

    etag: CloudflareValue | None = None
    """Hash of the code, as Cloudflare computes it."""
    modified_on: CloudflareValue | None = None
    """When the Worker last changed in Cloudflare (RFC 3339); a change made outside kflare shows here."""


class WorkerScriptStatus(Status):
    """What kflare last applied and observed of the Worker."""

    cloudflare_metadata: WorkerScriptMetadata | None = None
    """IDs and read-only data from Cloudflare."""
    applied_hash: Annotated[str, Field(max_length=64)] | None = None
    """SHA-256 of what was last uploaded: code, settings and binding values (a Secret counts by its UID and
    resourceVersion, never by its value)."""


class WorkerScript(Resource[WorkerScriptSpec, WorkerScriptStatus]):
    """WorkerScript uploads a Worker to a Cloudflare account, with its bindings."""

    info = KindInfo(
        kind="WorkerScript",
        rank=80,
        permissions=(
            Permission(
                "Account · Workers Scripts · Edit",
                "to upload, correct and delete Workers (the 2-minute request bound covers the upload)",
            ),
        ),
        claim_label="kflare.dev/worker-name",
        plural="workerscripts",
        short_names=("cfworker",),
        columns=(
            PrinterColumn("Script", ".spec.name"),
            PrinterColumn("Modified", ".status.cloudflareMetadata.modifiedOn"),
        ),
        immutable=("name", "accountRef"),
    )


class WorkerRouteSpec(KflareModel):
    """A pattern on a zone and the Worker it runs (none: an exclusion route)."""

    zone_ref: Annotated[LocalObjectReference, Refers("Zone")]
    """The Zone, in the same namespace, the route belongs to."""
    pattern: Annotated[str, Field(min_length=1, max_length=1024, pattern=ROUTE_PATTERN)]
    """`host/path` with optional wildcards, such as `*.example.com/api/*`; no scheme, no port; a host of the zone."""
    worker_script_ref: Annotated[LocalObjectReference, Refers("WorkerScript")] | None = None
    """The WorkerScript, in the same namespace, to run; leave out for an exclusion route (no Worker runs)."""


class WorkerRouteMetadata(KflareModel):
    """What Cloudflare reported of the route."""

    route_id: CloudflareValue | None = None
    """Cloudflare route ID."""
    zone_id: CloudflareValue | None = None
    """Cloudflare zone ID of the route's zone."""
    script: CloudflareValue | None = None
    """The Worker the route runs (empty for an exclusion route)."""


class WorkerRouteStatus(Status):
    """What kflare last observed of the route."""

    cloudflare_metadata: WorkerRouteMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class WorkerRoute(Resource[WorkerRouteSpec, WorkerRouteStatus]):
    """WorkerRoute runs a Worker (or none) for the requests matching a pattern on a zone."""

    info = KindInfo(
        kind="WorkerRoute",
        rank=90,
        permissions=(Permission("Zone · Workers Routes · Edit", "to create, correct and delete a zone's routes"),),
        claim_label="kflare.dev/route-id",
        plural="workerroutes",
        short_names=("cfroute",),
        columns=(
            PrinterColumn("Pattern", ".spec.pattern"),
            PrinterColumn("Worker", ".spec.workerScriptRef.name"),
            PrinterColumn("Route ID", ".status.cloudflareMetadata.routeID"),
        ),
        immutable=("zoneRef",),
    )
