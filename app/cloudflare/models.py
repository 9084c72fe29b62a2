"""Typed results of the Cloudflare calls kflare makes.

The models are permissive: they name the fields kflare reads, keep every other field the API sends (`extra="allow"`,
reachable through `model_extra` / `model_dump()`), and tolerate missing optional fields, so a change on Cloudflare's
side does not break parsing. Adding an object type is a model here and a few lines in `client.py`. An object a
resource manages names itself in messages (`described`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, JsonValue, SkipValidation

Json = Annotated[JsonValue, SkipValidation]
"""A value read as Cloudflare sent it, for kflare to pass on or compare: the parsed JSON of the reply, kept as it
is rather than validated a second time."""


class CloudflareModel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)


class Ref(CloudflareModel):
    """An `{id, name}` reference, such as a zone's account or owner."""

    id: str | None = None
    name: str | None = None


class TokenStatus(CloudflareModel):
    """The result of a token verification."""

    id: str
    status: str
    expires_on: str | None = None
    not_before: str | None = None

    @property
    def active(self) -> bool:
        return self.status == "active"


class Account(CloudflareModel):
    id: str
    name: str = ""
    type: str | None = None
    created_on: str | None = None
    settings: dict[str, Json] | None = None


class ZonePlan(CloudflareModel):
    id: str | None = None
    name: str | None = None
    legacy_id: str | None = None


class Zone(CloudflareModel):
    id: str
    name: str
    status: str | None = None
    type: str | None = None
    paused: bool = False
    account: Ref = Field(default_factory=Ref)
    owner: Ref | None = None
    plan: ZonePlan | None = None
    name_servers: list[str] = Field(default_factory=list)
    original_name_servers: list[str] | None = None
    created_on: str | None = None
    modified_on: str | None = None
    activated_on: str | None = None

    def described(self) -> str:
        return f"zone {self.name} ({self.id})"


class DNSRecord(CloudflareModel):
    id: str
    name: str
    type: str
    content: str | None = None
    ttl: int = 1
    proxied: bool | None = None
    proxiable: bool | None = None
    priority: int | None = None
    comment: str | None = None
    tags: list[str] = Field(default_factory=list)
    data: dict[str, Json] | None = None
    settings: dict[str, Json] | None = None
    created_on: str | None = None
    modified_on: str | None = None

    def described(self) -> str:
        return f"{self.type} record {self.name} ({self.id})"


class DNSBatchResult(CloudflareModel):
    """The records a DNS batch deleted, patched, replaced and created, each list in the order sent."""

    deletes: list[DNSRecord] = Field(default_factory=list)
    patches: list[DNSRecord] = Field(default_factory=list)
    puts: list[DNSRecord] = Field(default_factory=list)
    posts: list[DNSRecord] = Field(default_factory=list)


class Deleted(CloudflareModel):
    """The `{id}` most DELETE calls answer with."""

    id: str | None = None


class WorkerScript(CloudflareModel):
    """A Worker as the account's listing (and an upload's answer) shows it: its name is its `id`."""

    id: str
    etag: str | None = None
    created_on: str | None = None
    modified_on: str | None = None

    def described(self) -> str:
        return f"Worker {self.id}"


class WorkerRoute(CloudflareModel):
    id: str
    pattern: str
    script: str | None = None

    def described(self) -> str:
        return f"route {self.pattern} ({self.id})"


class KVNamespace(CloudflareModel):
    id: str
    title: str

    def described(self) -> str:
        return f"KV namespace {self.title!r} ({self.id})"


class R2Bucket(CloudflareModel):
    name: str
    creation_date: str | None = None
    location: str | None = None
    jurisdiction: str | None = None
    storage_class: str | None = None

    def described(self) -> str:
        return f"R2 bucket {self.name} ({self.jurisdiction or 'default'})"


class D1Database(CloudflareModel):
    uuid: str
    name: str
    created_at: str | None = None
    version: str | None = None
    jurisdiction: str | None = None

    def described(self) -> str:
        return f"D1 database {self.name} ({self.uuid})"


class Tunnel(CloudflareModel):
    """A Cloudflare Tunnel (`cfd_tunnel`); `deleted_at` is set once it is (soft-)deleted."""

    id: str
    name: str
    account_tag: str | None = None
    created_at: str | None = None
    deleted_at: str | None = None
    status: str | None = None
    config_src: str | None = None
    remote_config: bool | None = None

    @property
    def deleted(self) -> bool:
        return self.deleted_at is not None

    def described(self) -> str:
        return f"tunnel {self.name} ({self.id})"


class TunnelConfiguration(CloudflareModel):
    """A tunnel's remote configuration; `config` is None (version 0) before the first write."""

    tunnel_id: str
    account_id: str | None = None
    version: int = 0
    config: dict[str, Json] | None = None
    source: str | None = None
    created_at: str | None = None

    def described(self) -> str:
        return f"the configuration of tunnel {self.tunnel_id} (version {self.version})"


class RulesetRule(CloudflareModel):
    """One rule of a ruleset, as Cloudflare answers it."""

    id: str
    ref: str | None = None
    version: str | None = None
    action: str | None = None
    expression: str | None = None
    description: str = ""
    enabled: bool = True
    action_parameters: dict[str, Json] | None = None
    ratelimit: dict[str, Json] | None = None
    logging: dict[str, Json] | None = None
    last_updated: str | None = None


class Ruleset(CloudflareModel):
    """A ruleset with its rules (a zone's entry point for one phase)."""

    id: str
    name: str | None = None
    kind: str | None = None
    phase: str | None = None
    version: str | None = None
    rules: list[RulesetRule] = Field(default_factory=list)


class ManagedTransformState(CloudflareModel):
    id: str
    enabled: bool = False
    has_conflict: bool = False


class ManagedHeaders(CloudflareModel):
    """A zone's managed transforms, those its plan offers."""

    managed_request_headers: list[ManagedTransformState] = Field(default_factory=list)
    managed_response_headers: list[ManagedTransformState] = Field(default_factory=list)

    def enabled(self) -> list[str]:
        return sorted(t.id for t in (*self.managed_request_headers, *self.managed_response_headers) if t.enabled)


class CustomList(CloudflareModel):
    """An account's custom list (without its items)."""

    id: str
    name: str
    kind: str = "ip"
    description: str | None = None
    num_items: int = 0
    num_referencing_filters: int = 0


class ListItem(CloudflareModel):
    id: str | None = None
    ip: str | None = None
    comment: str | None = None


class ListOperation(CloudflareModel):
    """An asynchronous bulk operation on a list's items."""

    id: str
    status: str
    error: str | None = None
    completed: str | None = None


class OperationID(CloudflareModel):
    operation_id: str
