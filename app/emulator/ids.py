"""Identifiers and timestamps in Cloudflare's formats."""

from __future__ import annotations

import re
import secrets
import uuid
from datetime import UTC, datetime

_HEX_ID = re.compile(r"[0-9a-f]{32}")
_TOKEN_VALUE = re.compile(r"[A-Za-z0-9_-]{1,200}")


def new_id() -> str:
    """A 32-character lowercase hex ID, the shape of account, zone and DNS record IDs."""
    return uuid.uuid4().hex


def is_id(value: str) -> bool:
    return _HEX_ID.fullmatch(value) is not None


def new_token_value() -> str:
    """40 URL-safe characters, like the secrets Cloudflare hands out."""
    return secrets.token_urlsafe(30)


def is_token_value(value: str) -> bool:
    """Cloudflare answers 6003/6111 to bearer values outside this alphabet before it looks the token up."""
    return _TOKEN_VALUE.fullmatch(value) is not None


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds and a ``Z``, as Cloudflare writes ``created_on`` and friends."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_iso() -> str:
    return iso(utcnow())


def parse_iso(value: str) -> datetime:
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
