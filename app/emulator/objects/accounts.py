"""Accounts: ``{id, name, type, created_on, settings}``."""

from __future__ import annotations

import copy
from typing import Any

from app.emulator.envelope import CloudflareError
from app.emulator.ids import new_id, now_iso
from app.emulator.state import Obj


def new_account(
    name: str,
    *,
    account_id: str | None = None,
    account_type: str = "standard",
    created_on: str | None = None,
    settings: dict[str, Any] | None = None,
) -> Obj:
    return {
        "id": account_id or new_id(),
        "name": name,
        "type": account_type,
        "created_on": created_on or now_iso(),
        "settings": {
            "enforce_twofactor": False,
            "api_access_enabled": None,
            "abuse_contact_email": None,
            **(settings or {}),
        },
    }


def render_account(account: Obj) -> Obj:
    return copy.deepcopy(account)


def account_not_found(path: str) -> CloudflareError:
    # Unverified: Cloudflare's answer for a well-formed unknown account ID (7003 or 9109 are both reported).
    return CloudflareError.single(404, 7003, f"Could not route to {path}, perhaps your object identifier is invalid?")
