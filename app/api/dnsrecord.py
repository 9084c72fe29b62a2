"""DNSRecord: one DNS record in a Zone."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Final, Literal, Self, get_args

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn, Problems
from app.api.meta import Status
from app.api.refs import LocalObjectReference, Refers, ZoneReference
from app.api.resource import Resource
from app.api.text import NAME_SCHEMA, TEXT_SCHEMA, NameCheck, TextCheck

RecordType = Literal[
    "A",
    "AAAA",
    "CAA",
    "CERT",
    "CNAME",
    "DNSKEY",
    "DS",
    "HTTPS",
    "LOC",
    "MX",
    "NAPTR",
    "NS",
    "OPENPGPKEY",
    "PTR",
    "SMIMEA",
    "SRV",
    "SSHFP",
    "SVCB",
    "TLSA",
    "TXT",
    "URI",
]
RECORD_TYPES: Final[tuple[str, ...]] = get_args(RecordType)
PROXIABLE_TYPES: Final = frozenset({"A", "AAAA", "CNAME"})
"""Types Cloudflare can proxy."""
PRIORITY_TYPES: Final = frozenset({"MX", "SRV", "URI"})
"""Types with a top-level priority."""
DATA_TYPES: Final = frozenset(
    {"CAA", "CERT", "DNSKEY", "DS", "HTTPS", "LOC", "NAPTR", "SMIMEA", "SRV", "SSHFP", "SVCB", "TLSA", "URI"}
)
"""Types whose value may be given as structured `data` instead of `content`."""
CONTENT_TYPES: Final = frozenset(RECORD_TYPES) - DATA_TYPES
"""Types whose value is only ever `content`."""

TTL_AUTOMATIC: Final = 1
TTL_MIN: Final = 30
TTL_MAX: Final = 86400
TTL_MESSAGE: Final = "ttl must be 1 (automatic) or between 30 and 86400"
COMMENT_MAX: Final = 500
TAGS_MAX: Final = 20
NAME_MAX: Final = 255
LABEL_MAX: Final = 63

NO_NEWLINE_PATTERN = r"^[^\r\n]*$"
TAG_PATTERN = r"^[A-Za-z0-9_-]+(:[^\r\n]*)?$"
_TAG = re.compile(TAG_PATTERN)
_SPACE = re.compile(r"\s")
"""White space of any kind (`re`'s `\\s` on text is `str.isspace`)."""
_PLAIN_NAME = re.compile(r"(?:[^\s.]{1,63}\.)*[^\s.]{1,63}\.?")
"""A DNS name `_check_name` accepts, matched in one pass (most names are): labels of 1 to 63 characters other than
white space, an optional final dot. Anything else is checked step by step, to say what is wrong."""
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"(?:{_OCTET}\.){{3}}{_OCTET}")
"""A dotted-quad IPv4 address as `ipaddress` accepts it (no leading zeros), matched without its per-octet Python."""


def _is_address(kind: str, content: str) -> bool:
    """Whether `content` is an address of an A (IPv4) or AAAA (IPv6) record."""
    if kind == "A" and _IPV4.fullmatch(content):
        return True
    family: type[ipaddress.IPv4Address | ipaddress.IPv6Address] = (
        ipaddress.IPv4Address if kind == "A" else ipaddress.IPv6Address
    )
    try:
        family(content)
    except ValueError:
        return False
    return True


def _listing(types: frozenset[str]) -> str:
    names = sorted(types)
    return ", ".join(names[:-1]) + " and " + names[-1]


class DNSRecordSpec(KflareModel):
    """The record: its zone, name, type and value, and Cloudflare's settings for it."""

    zone_ref: ZoneReference
    """The Zone the record belongs to: in the same namespace, or in `namespace` if that Zone's `hostnameGrants`
    grant this namespace the record's name."""
    name: Annotated[str, Field(min_length=1, max_length=NAME_MAX, json_schema_extra=NAME_SCHEMA), NameCheck]
    """Record name: a fully qualified domain name in Punycode, such as `www.example.com` (`@` for the apex)."""
    type: RecordType
    """Record type."""
    content: Annotated[str, Field(max_length=8192, json_schema_extra=TEXT_SCHEMA), TextCheck] | None = None
    """Record value, such as an IP address or a host name. Leave out for a record given by `data`."""
    ttl: (
        Annotated[
            int,
            Field(
                ge=TTL_AUTOMATIC,
                le=TTL_MAX,
                json_schema_extra={
                    "x-kubernetes-validations": [
                        {"rule": f"self == {TTL_AUTOMATIC} || self >= {TTL_MIN}", "message": TTL_MESSAGE}
                    ]
                },
            ),
        ]
        | None
    ) = None
    """Time to live in seconds: 1 means automatic (the default); otherwise 30 to 86400 (below 60: Enterprise)."""
    proxied: bool | None = None
    """Whether Cloudflare proxies the traffic (A, AAAA and CNAME only). Unset means not proxied."""
    priority: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Priority of an MX, SRV or URI record. Unset leaves Cloudflare's value alone."""
    comment: (
        Annotated[
            str,
            Field(max_length=COMMENT_MAX, json_schema_extra={"pattern": NO_NEWLINE_PATTERN, **TEXT_SCHEMA}),
            TextCheck,
        ]
        | None
    ) = None
    """A note about the record; no effect on DNS. At most 100 characters on the Free plan, 500 on others."""
    tags: (
        Annotated[
            list[
                Annotated[
                    str, Field(max_length=1024, json_schema_extra={"pattern": TAG_PATTERN, **TEXT_SCHEMA}), TextCheck
                ]
            ],
            Field(max_length=TAGS_MAX),
        ]
        | None
    ) = None
    """Tags as `name:value` (names of letters, digits, `-` and `_`); not available on the Free plan."""
    data: dict[str, Any] | None = None
    """Structured value for CAA, CERT, DNSKEY, DS, HTTPS, LOC, NAPTR, SMIMEA, SRV, SSHFP, SVCB, TLSA and URI
    records, in Cloudflare's API form (for SRV: `priority`, `weight`, `port`, `target`). Instead of `content`."""
    # a parent: the record follows the tunnel when it is recreated, and its deletion waits for the record
    tunnel_ref: Annotated[LocalObjectReference, Refers("Tunnel")] | None = None
    """A Tunnel, in the same namespace, the record points at: a CNAME to the tunnel, instead of `content`."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if name == "@" or _PLAIN_NAME.fullmatch(name):
            return name
        if _SPACE.search(name):
            raise PydanticCustomError("dns_name", "a DNS name cannot contain white space")
        labels = name.removesuffix(".").split(".")
        if any(not label for label in labels):
            raise PydanticCustomError("dns_name", "a DNS name cannot have an empty label (`..`)")
        longest = max(labels, key=len)
        if len(longest) > LABEL_MAX:
            raise PydanticCustomError(
                "dns_name",
                "each label of a DNS name is at most 63 characters; {label!r} has {length}",
                {"label": longest, "length": len(longest)},
            )
        return name

    @field_validator("ttl")
    @classmethod
    def _check_ttl(cls, ttl: int | None) -> int | None:
        if ttl is not None and ttl != TTL_AUTOMATIC and not TTL_MIN <= ttl <= TTL_MAX:
            raise PydanticCustomError("ttl", TTL_MESSAGE)
        return ttl

    @field_validator("comment")
    @classmethod
    def _check_comment(cls, comment: str | None) -> str | None:
        if comment is not None and ("\n" in comment or "\r" in comment):
            raise PydanticCustomError("comment", "a comment cannot contain line breaks")
        return comment

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, tags: list[str] | None) -> list[str] | None:
        if tags is None:
            return None
        problems = Problems()
        seen: set[str] = set()
        for index, tag in enumerate(tags):
            if not _TAG.match(tag):
                problems.add(
                    (index,),
                    f"tag {tag!r} must be name:value, the name made of letters, digits, '-' and '_'"
                    " and the value without line breaks",
                    tag,
                )
                continue
            name, _, value = tag.partition(":")
            normal = f"{name.lower()}:{value}"
            if normal in seen:
                problems.add((index,), f"tag {tag!r} is listed twice (tag names ignore case)", tag)
            seen.add(normal)
        problems.raise_if_any("tags")
        return tags

    @model_validator(mode="after")
    def _check_type_rules(self) -> Self:
        problems = Problems()
        kind = self.type
        has_content = bool(self.content)
        if self.proxied and kind not in PROXIABLE_TYPES:
            problems.add(
                "proxied",
                f"only {_listing(PROXIABLE_TYPES)} records can be proxied, not {kind}",
                self.proxied,
            )
        if self.priority is not None and kind not in PRIORITY_TYPES:
            problems.add(
                "priority",
                f"only {_listing(PRIORITY_TYPES)} records have a priority; remove it from this {kind} record",
                self.priority,
            )
        if self.data is not None and kind in CONTENT_TYPES:
            problems.add("data", f"a {kind} record takes content, not data", self.data)
        elif self.data is not None and has_content:
            problems.add("data", "set either content or data, not both", self.data)
        if self.tunnel_ref is not None:
            if kind != "CNAME":
                problems.add("tunnelRef", f"only a CNAME record can point at a tunnel, not {kind}", kind)
            if has_content:
                problems.add("content", "leave content out when tunnelRef is set: the tunnel provides it")
            if self.proxied is False:
                problems.add("proxied", "a record pointing at a tunnel is always proxied", self.proxied)
        elif kind in CONTENT_TYPES and not has_content:
            problems.add("content", f"a {kind} record needs content")
        elif kind in DATA_TYPES and not has_content and self.data is None:
            problems.add("content", f"a {kind} record needs content or data")
        if has_content and kind in ("A", "AAAA") and not _is_address(kind, self.content or ""):
            version = "IPv4" if kind == "A" else "IPv6"
            problems.add("content", f"an {kind} record's content must be an {version} address", self.content)
        problems.raise_if_any(type(self).__name__)
        return self

    @property
    def effective_ttl(self) -> int:
        return self.ttl if self.ttl is not None else TTL_AUTOMATIC

    @property
    def effective_proxied(self) -> bool:
        return bool(self.proxied)


class DNSRecordMetadata(KflareModel):
    """What Cloudflare reported of the record."""

    record_id: Annotated[str, Field(max_length=256)] | None = None
    """Cloudflare DNS record ID."""
    zone_id: Annotated[str, Field(max_length=256)] | None = None
    """Cloudflare zone ID of the record's zone."""
    proxiable: bool | None = None
    """Whether Cloudflare can proxy the record."""


class DNSRecordStatus(Status):
    """What kflare last observed of the record."""

    cloudflare_metadata: DNSRecordMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class DNSRecord(Resource[DNSRecordSpec, DNSRecordStatus]):
    """DNSRecord manages one DNS record in a Zone."""

    info = KindInfo(
        kind="DNSRecord",
        rank=30,
        permissions=(Permission("Zone · DNS · Edit", "to create, correct and delete records"),),
        claim_label="kflare.dev/record-id",
        plural="dnsrecords",
        short_names=("cfrecord",),
        columns=(
            PrinterColumn("Record Name", ".spec.name"),
            PrinterColumn("Type", ".spec.type"),
            PrinterColumn("Content", ".spec.content"),
            PrinterColumn("Record ID", ".status.cloudflareMetadata.recordID"),
        ),
        immutable=("zoneRef", "name", "type"),
    )
