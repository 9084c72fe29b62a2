"""One DNS record as Cloudflare keeps it: its types, the checks of its name and content, its structured data, and
the normalised record a request builds (the rules and their error codes are listed in `app.emulator.kinds.dns`)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from app.emulator.envelope import CloudflareError, error
from app.emulator.ids import new_id, now_iso
from app.emulator.kinds.zones import limits_of
from app.emulator.state import Obj

RECORD_TYPES = (
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
)
PROXIABLE = frozenset({"A", "AAAA", "CNAME"})
PRIORITY_TYPES = frozenset({"MX", "URI"})
HOST_CONTENT_TYPES = frozenset({"CNAME", "NS", "MX", "PTR"})
CAA_TAGS = ("issue", "issuewild", "iodef", "issuemail", "issuevmc")

PartKind = Literal["int", "number", "text", "host", "quoted", "lat", "long", "meters"]


@dataclass(frozen=True)
class Part:
    name: str
    kind: PartKind
    maximum: int = 65535


def _parts(*spec: tuple[str, PartKind] | tuple[str, PartKind, int]) -> tuple[Part, ...]:
    return tuple(Part(*item) for item in spec)


# The components of ``data`` per type, in the order they are written in ``content``.
DATA_LAYOUT: dict[str, tuple[Part, ...]] = {
    "CAA": _parts(("flags", "int", 255), ("tag", "text"), ("value", "quoted")),
    "CERT": _parts(("type", "int"), ("key_tag", "int"), ("algorithm", "int", 255), ("certificate", "text")),
    "DNSKEY": _parts(("flags", "int"), ("protocol", "int", 255), ("algorithm", "int", 255), ("public_key", "text")),
    "DS": _parts(("key_tag", "int"), ("algorithm", "int", 255), ("digest_type", "int", 255), ("digest", "text")),
    "HTTPS": _parts(("priority", "int"), ("target", "host"), ("value", "text")),
    "SVCB": _parts(("priority", "int"), ("target", "host"), ("value", "text")),
    "LOC": _parts(
        ("lat_degrees", "int", 90),
        ("lat_minutes", "int", 59),
        ("lat_seconds", "number", 60),
        ("lat_direction", "lat"),
        ("long_degrees", "int", 180),
        ("long_minutes", "int", 59),
        ("long_seconds", "number", 60),
        ("long_direction", "long"),
        ("altitude", "meters"),
        ("size", "meters"),
        ("precision_horz", "meters"),
        ("precision_vert", "meters"),
    ),
    "NAPTR": _parts(
        ("order", "int"),
        ("preference", "int"),
        ("flags", "quoted"),
        ("service", "quoted"),
        ("regex", "quoted"),
        ("replacement", "host"),
    ),
    "SMIMEA": _parts(
        ("usage", "int", 255), ("selector", "int", 255), ("matching_type", "int", 255), ("certificate", "text")
    ),
    "TLSA": _parts(
        ("usage", "int", 255), ("selector", "int", 255), ("matching_type", "int", 255), ("certificate", "text")
    ),
    "SRV": _parts(("priority", "int"), ("weight", "int"), ("port", "int"), ("target", "host")),
    "SSHFP": _parts(("algorithm", "int", 255), ("type", "int", 255), ("fingerprint", "text")),
    "URI": _parts(("weight", "int"), ("target", "quoted")),
}

# Record names and targets may hold underscores (_dmarc, _sip._tcp), unlike zone names.
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|(\S+)')
_FIELDS = ("name", "type", "content", "ttl", "proxied", "priority", "data", "comment", "tags", "settings")


class RecordInput(BaseModel):
    """The fields a create, PUT or PATCH body may carry; unknown ones are ignored like Cloudflare does."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    name: str | None = None
    type: str | None = None
    content: str | None = None
    ttl: int | None = None
    proxied: bool | None = None
    priority: int | None = None
    data: dict[str, JsonValue] | None = None
    comment: str | None = None
    tags: list[str] | None = None
    settings: dict[str, JsonValue] | None = None


# Errors


def dns_invalid(code: int, message: str) -> CloudflareError:
    return CloudflareError(400, [error(1004, "DNS Validation Error", chain=[(code, message)])])


def body_invalid(message: str, _pointer: str | None = None) -> CloudflareError:
    return dns_invalid(9101, message)


def record_not_found() -> CloudflareError:
    return CloudflareError.single(404, 81044, "Record does not exist.")


def _identical() -> CloudflareError:
    return CloudflareError.single(400, 81058, "An identical record already exists.")


def _cname_conflict() -> CloudflareError:
    return CloudflareError.single(400, 81053, "An A, AAAA, or CNAME record with that host already exists.")


def _address_conflict() -> CloudflareError:
    return CloudflareError.single(400, 81054, "A CNAME record with that host already exists.")


def quota_exceeded() -> CloudflareError:
    return CloudflareError.single(400, 81045, "Record quota exceeded.")


# Names and contents


def fqdn(name: str, zone_name: str) -> str:
    """The record name as Cloudflare stores it: lowercase FQDN under the zone, Punycode."""
    candidate = name.strip().rstrip(".").lower()
    if candidate in ("", "@"):
        return zone_name
    if not candidate.isascii():
        try:
            candidate = ".".join(
                label if label.isascii() else label.encode("idna").decode("ascii") for label in candidate.split(".")
            )
        except UnicodeError:
            raise dns_invalid(9000, "DNS name is invalid.") from None
    if candidate != zone_name and not candidate.endswith("." + zone_name):
        candidate = f"{candidate}.{zone_name}"
    labels = candidate.split(".")
    valid = len(candidate) <= 253 and all(
        _LABEL.fullmatch(label) or (label == "*" and index == 0) for index, label in enumerate(labels)
    )
    if not valid:
        raise dns_invalid(9000, "DNS name is invalid.")
    return candidate


def _host(value: str, record_type: str) -> str:
    host = value.strip().rstrip(".").lower()
    if host == "" and value.strip() == ".":
        return "."  # the null target of MX and SRV
    labels = host.split(".")
    is_ip = _is_ipv4(host) or _is_ipv6(host)
    if not host or is_ip or len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise dns_invalid(9007, f"Content for {record_type} record is invalid.")
    return host


def _is_ipv4(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def _is_ipv6(value: str) -> bool:
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


def _content(record_type: str, content: str) -> str:
    if record_type == "A":
        if not _is_ipv4(content.strip()):
            raise CloudflareError.single(400, 9005, "Content for A record must be a valid IPv4 address.")
        return str(ipaddress.IPv4Address(content.strip()))
    if record_type == "AAAA":
        if not _is_ipv6(content.strip()):
            raise CloudflareError.single(400, 9006, "Content for AAAA record must be a valid IPv6 address.")
        return ipaddress.IPv6Address(content.strip()).compressed
    if record_type in HOST_CONTENT_TYPES:
        return _host(content, record_type)
    return content


# Structured data


def _format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _format_part(part: Part, value: str | float) -> str:
    if part.kind in ("int", "number", "meters") and not isinstance(value, str):
        number = _format_number(value)
        return f"{number}m" if part.kind == "meters" else number
    if part.kind == "quoted":
        escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return str(value)


def format_content(record_type: str, data: Obj) -> str:
    return " ".join(_format_part(part, data[part.name]) for part in DATA_LAYOUT[record_type])


def _check_part(record_type: str, part: Part, value: JsonValue) -> str | float:
    where = f"data.{part.name}"
    if value is None:
        raise dns_invalid(9101, f"{where} is a required field for {record_type} records.")
    if part.kind in ("int", "number", "meters"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise dns_invalid(9101, f"{where} must be a number.")
        if part.kind == "int":
            if not float(value).is_integer() or not 0 <= value <= part.maximum:
                raise dns_invalid(9101, f"{where} must be an integer between 0 and {part.maximum}.")
            return int(value)
        if part.kind == "number" and not 0 <= value <= part.maximum:
            raise dns_invalid(9101, f"{where} must be between 0 and {part.maximum}.")
        return int(value) if float(value).is_integer() else float(value)
    if not isinstance(value, str):
        raise dns_invalid(9101, f"{where} must be a string.")
    if part.kind == "lat" and value.upper() not in ("N", "S"):
        raise dns_invalid(9101, f"{where} must be N or S.")
    if part.kind == "long" and value.upper() not in ("E", "W"):
        raise dns_invalid(9101, f"{where} must be E or W.")
    if part.kind in ("lat", "long"):
        return value.upper()
    if part.kind == "host":
        return _host(value, record_type)
    if part.kind == "text" and not value.strip():
        raise dns_invalid(9101, f"{where} must not be empty.")
    if record_type == "CAA" and part.name == "tag" and value not in CAA_TAGS:
        raise dns_invalid(9101, f"data.tag must be one of {', '.join(CAA_TAGS)}.")
    return value


def check_data(record_type: str, data: Obj) -> Obj:
    return {part.name: _check_part(record_type, part, data.get(part.name)) for part in DATA_LAYOUT[record_type]}


def parse_content(record_type: str, content: str) -> Obj:
    """``data`` read back from ``content``; the last text component takes the rest of the line."""
    layout = DATA_LAYOUT[record_type]
    tokens = list(_TOKEN.finditer(content.strip()))
    if len(tokens) < len(layout):
        raise dns_invalid(9101, f"Content for {record_type} record is invalid.")
    data: Obj = {}
    for index, part in enumerate(layout):
        token = tokens[index]
        if index == len(layout) - 1 and part.kind == "text":
            raw: str = content.strip()[token.start() :]
        else:
            raw = token.group(1) if token.group(1) is not None else token.group(2)
        if part.kind in ("int", "number", "meters"):
            text = raw.removesuffix("m") if part.kind == "meters" else raw
            try:
                data[part.name] = float(text)
            except ValueError:
                raise dns_invalid(9101, f"Content for {record_type} record is invalid.") from None
        elif part.kind == "quoted":
            data[part.name] = raw.replace('\\"', '"').replace("\\\\", "\\")
        else:
            data[part.name] = raw
    return check_data(record_type, data)


# Records


def _settings(record_type: str, given: Obj | None) -> Obj:
    allowed = {"ipv4_only", "ipv6_only"} | ({"flatten_cname"} if record_type == "CNAME" else set())
    settings: Obj = {"flatten_cname": False} if record_type == "CNAME" else {}
    for key, value in (given or {}).items():
        if key not in allowed:
            raise dns_invalid(9101, f"settings.{key} is not a setting of {record_type} records.")
        if not isinstance(value, bool):
            raise dns_invalid(9101, f"settings.{key} must be a boolean.")
        settings[key] = value
    return settings


def _tags(zone: Obj, tags: list[str]) -> list[str]:
    quota = limits_of(zone).tags_per_record
    if len(tags) > quota:
        raise dns_invalid(9300, f"DNS record has {len(tags)} tags, exceeding the quota of {quota}.")
    cleaned = []
    for tag in tags:
        name, _, _value = tag.partition(":")
        if not name.strip():
            raise dns_invalid(9101, f"Tag {tag!r} must be written name:value.")
        cleaned.append(tag.strip())
    return cleaned


def build_record(zone: Obj, body: RecordInput, *, previous: Obj | None = None, partial: bool = False) -> Obj:
    """The record a create (``previous`` None), PUT (``previous``) or PATCH (``partial``) body produces."""
    sent = body.model_fields_set
    fields: Obj = {}
    if partial and previous is not None:
        fields = {name: previous.get(name) for name in _FIELDS}
    for name in _FIELDS:
        if name in sent:
            fields[name] = getattr(body, name)

    raw_type = fields.get("type")
    if not raw_type:
        raise dns_invalid(9101, "type is a required field.")
    record_type = str(raw_type).upper()
    if record_type not in RECORD_TYPES:
        raise dns_invalid(9101, f"{raw_type} is not a valid DNS record type.")
    type_changed = previous is not None and previous["type"] != record_type
    if partial and type_changed and "settings" not in sent:
        fields["settings"] = None  # the old type's settings may not exist for the new one
    raw_name = fields.get("name")
    if raw_name is None:
        raise dns_invalid(9000, "DNS name is invalid.")
    name = fqdn(str(raw_name), zone["name"])

    data: Obj | None = None
    if record_type in DATA_LAYOUT:
        # New `data` wins; new `content` alone is read back into data; otherwise a PATCH keeps the old data.
        keeps_data = "data" in sent or ("content" not in sent and partial and not type_changed)
        given_data: Obj | None = fields.get("data") if keeps_data else None
        if given_data is not None:
            data = check_data(record_type, given_data)
        elif fields.get("content"):
            data = parse_content(record_type, str(fields["content"]))
        else:
            raise dns_invalid(9101, f"data is a required field for {record_type} records.")
        content = format_content(record_type, data)
    else:
        raw_content = fields.get("content")
        if raw_content is None or raw_content == "":
            raise dns_invalid(9101, "content is a required field.")
        content = _content(record_type, str(raw_content))

    priority = fields.get("priority")
    if record_type in PRIORITY_TYPES:
        if priority is None:
            raise dns_invalid(9101, "priority is a required field.")
        if not 0 <= int(priority) <= 65535:
            raise dns_invalid(9101, "priority must be between 0 and 65535.")

    proxied = bool(fields.get("proxied") or False)
    if proxied and record_type not in PROXIABLE:
        raise dns_invalid(9041, "Invalid proxied mode. Record cannot be proxied")

    limits = limits_of(zone)
    ttl = fields.get("ttl")
    ttl = 1 if ttl is None else int(ttl)
    if ttl != 1 and not limits.min_ttl <= ttl <= 86400:
        raise dns_invalid(9021, f"Invalid TTL. Must be between {limits.min_ttl} and 86400 seconds, or 1 for Automatic.")
    if proxied:
        ttl = 1

    comment = fields.get("comment") or None
    if comment is not None and len(comment) > limits.comment_length:
        raise dns_invalid(9313, f"DNS record comment exceeds the maximum length of {limits.comment_length} characters.")
    tags = _tags(zone, list(fields.get("tags") or []))

    now = now_iso()
    record: Obj = {
        "id": previous["id"] if previous is not None else (body.id or new_id()),
        "name": name,
        "type": record_type,
        "content": content,
    }
    if priority is not None and record_type in PRIORITY_TYPES:
        record["priority"] = int(priority)
    if data is not None:
        record["data"] = data
    record.update(
        {
            "proxiable": record_type in PROXIABLE,
            "proxied": proxied,
            "ttl": ttl,
            "settings": _settings(record_type, fields.get("settings")),
            "meta": {},
            "comment": comment,
            "tags": tags,
            "created_on": previous["created_on"] if previous is not None else now,
            "modified_on": now,
        }
    )
    if comment is not None:
        unchanged = previous is not None and previous.get("comment") == comment
        record["comment_modified_on"] = previous.get("comment_modified_on", now) if unchanged and previous else now
    if tags:
        unchanged = previous is not None and previous.get("tags") == tags
        record["tags_modified_on"] = previous.get("tags_modified_on", now) if unchanged and previous else now
    return record


def check_conflicts(others: Iterable[Obj], record: Obj) -> None:
    """Refuse ``record`` if it clashes with another record of the zone (itself excluded)."""
    same_name = [o for o in others if o["name"] == record["name"] and o["id"] != record["id"]]
    kind = record["type"]
    if kind == "CNAME" and any(o["type"] in ("A", "AAAA", "CNAME") for o in same_name):
        raise _cname_conflict()
    if kind in ("A", "AAAA") and any(o["type"] == "CNAME" for o in same_name):
        raise _address_conflict()
    content = record["content"].casefold()
    if any(o["type"] == kind and o["content"].casefold() == content for o in same_name):
        raise _identical()


def check_quota(zone: Obj, count_after: int) -> None:
    if count_after > limits_of(zone).records:
        raise quota_exceeded()
