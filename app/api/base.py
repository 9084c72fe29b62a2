"""What every kflare model shares: wire names, the model base class, field errors and per-kind metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

GROUP = "kflare.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORY = "kflare"

# Kubernetes spells acronyms in upper case inside a camelCase name (`accountID`, `noTLSVerify`, `edgeTTL`).
WIRE_ACRONYMS: dict[str, str] = {
    "id": "ID",
    "ip": "IP",
    "tls": "TLS",
    "ttl": "TTL",
    "uid": "UID",
    "url": "URL",
}


def wire_name(name: str) -> str:
    """The camelCase name a snake_case attribute has on the wire: `account_id` -> `accountID`."""
    first, *rest = name.strip("_").split("_")
    return first + "".join(WIRE_ACRONYMS.get(part, part[:1].upper() + part[1:]) for part in rest)


class KflareModel(BaseModel):
    """Base of every model: camelCase on the wire, snake_case in Python, docstrings become descriptions (in the
    rendered schemas: `app.api.schema.DocumentedSchema`).

    Unknown fields are ignored, the way the API server prunes fields a structural schema does not know; the
    admission webhook reports them with `app.api.validation.unknown_fields` before that could surprise anyone.
    """

    model_config = ConfigDict(
        alias_generator=wire_name,
        populate_by_name=True,
        extra="ignore",
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON form Kubernetes expects: wire names, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


Loc = tuple[str | int, ...]


def format_path(loc: Sequence[str | int]) -> str:
    """`("spec", "tags", 2)` -> `spec.tags[2]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True, order=True)
class FieldError:
    """One reason an object is refused, with the path of the field at fault (`spec.ttl`, `spec.tags[2]`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class Problems:
    """Collects the problems a cross-field validator finds and raises them together, each at its own path.

    Raised from a pydantic validator, the errors keep their paths below the model being validated, so
    `spec.proxied` is reported as such when the spec is validated as part of its object.
    """

    def __init__(self) -> None:
        self._errors: list[InitErrorDetails] = []

    def add(self, loc: str | Loc, message: str, value: object = None) -> None:
        where: Loc = tuple(loc.split(".")) if isinstance(loc, str) else loc
        error = PydanticCustomError("kflare_invalid", "{message}", {"message": message})
        self._errors.append(InitErrorDetails(type=error, loc=where, input=value))

    def __bool__(self) -> bool:
        return bool(self._errors)

    def raise_if_any(self, title: str) -> None:
        if self._errors:
            raise ValidationError.from_exception_data(title, self._errors)


Scope = Literal["Namespaced", "Cluster"]
ColumnType = Literal["string", "integer", "number", "boolean", "date"]


@dataclass(frozen=True)
class PrinterColumn:
    """A column of `kubectl get` (CRD `additionalPrinterColumns`)."""

    name: str
    json_path: str
    type: ColumnType = "string"
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class Permission:
    """A token permission a kind needs, as the deploy guide's table shows it (`kflare docs` writes the table)."""

    permission: str
    """The permission by its dashboard label, such as `Account · D1 · Edit`."""
    why: str
    """What kflare does with it."""
    label: str = ""
    r"""The table's first cell when it is not the kind's name alone (`Zone with \`spec.plan\``)."""


@dataclass(frozen=True)
class KindInfo:
    """What the CRD of a kind says besides its schema.

    `immutable` lists spec fields by their wire path relative to `spec` (`name`, `zoneRef`, `a.b`); each gets a
    CEL transition rule in the CRD and is checked by `app.api.validation.immutable_violations`.
    `columns` are the kind's own printer columns; Ready, Reason and Age are appended to every reconciled kind.
    `reconciled` is False for a kind that only configures kflare (no Cloudflare object, no Ready condition).
    """

    kind: str
    plural: str
    short_names: tuple[str, ...] = ()
    scope: Scope = "Namespaced"
    singular: str = ""
    categories: tuple[str, ...] = (CATEGORY,)
    columns: tuple[PrinterColumn, ...] = ()
    immutable: tuple[str, ...] = ()
    reconciled: bool = True
    claim_label: str | None = None
    """The label by which a resource records the ID of the Cloudflare object it claims (created or adopted); only
    kflare may write it. None for a kind that claims nothing (CloudflareAccount names its account in its spec)."""
    group: str = GROUP
    """The API group: kflare's, but for the kinds of another project kflare reads (their CRDs keep their group)."""
    permissions: tuple[Permission, ...] = ()
    """The token permissions the kind needs (the deploy guide's table of them is generated from these)."""
    internal: bool = False
    """True for a kind only kflare writes (the claims of adopted objects): a CRD, no webhook, no tenant access."""
    rank: int = 1000
    """The kind's place among the kinds (lower first), where it matters more than its parents: kinds of one rank
    are ordered parents first. The kinds of this release have theirs; a new kind keeps the default and comes last."""
    parents: tuple[str, ...] = ()
    """Kinds this kind's objects refer to besides those its spec's references name (`refers_to` of a reference
    type, such as `AccountReference`'s): the registry orders every kind after its parents."""

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"

    def names(self) -> tuple[str, ...]:
        """Every name `kubectl` accepts for the kind, lower case."""
        return tuple(dict.fromkeys(n.lower() for n in (self.kind, self.plural, self.singular_name, *self.short_names)))
