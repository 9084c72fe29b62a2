"""The credential chain: resource -> its parents -> CloudflareAccount -> token Secret -> a Cloudflare client.

Read afresh on every reconcile from the caches (no Kubernetes call), so a rotated token is used at once.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from dataclasses import dataclass

from app.api import CloudflareAccount
from app.api.constants import Reason
from app.cloudflare.client import CloudflareClient
from app.kube.client import JSON
from reconcilers.context import Context
from reconcilers.lifecycle import RETRY_PARENT, NotReady


@dataclass(frozen=True)
class AccountLink:
    """A Ready account's Cloudflare ID and a client for its token."""

    account_id: str
    client: CloudflareClient


async def read_token(ctx: Context, account: CloudflareAccount) -> str:
    """The account's API token from its Secret, or NotReady with the reason a user can act on."""
    ref = account.spec.token_secret_ref
    # A watch for the Secret starts when the account is first seen; "not found" is only true once it has listed.
    with contextlib.suppress(TimeoutError):
        await ctx.secrets.wait_synced((ref.namespace, ref.name))
    secret = ctx.secrets.get((ref.namespace, ref.name))
    where = f"Secret {ref.namespace}/{ref.name}"
    if secret is None:
        raise NotReady(Reason.SECRET_NOT_FOUND, f"{where} not found")
    encoded = (secret.get("data") or {}).get(ref.key)
    if encoded is None:
        raise NotReady(Reason.TOKEN_KEY_MISSING, f"{where} has no key {ref.key!r}")
    try:
        token = base64.b64decode(encoded, validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        raise NotReady(Reason.INVALID_TOKEN, f"key {ref.key!r} of {where} is not a text token") from None
    if not token:
        raise NotReady(Reason.INVALID_TOKEN, f"key {ref.key!r} of {where} is empty")
    return token


async def ready_account(ctx: Context, name: str) -> AccountLink:
    """The named CloudflareAccount, if it exists and is Ready, with a client for its token."""
    raw: JSON | None = ctx.cached(CloudflareAccount.info.kind, name)
    if raw is None:
        raise NotReady(
            Reason.ACCOUNT_NOT_FOUND,
            f"CloudflareAccount {name} not found",
            requeue_after=RETRY_PARENT,
            parent_gone=True,
        )
    account = CloudflareAccount.model_validate(raw)
    # An account being deleted waits (InUse) for its dependants, which need its token to clean up.
    if not account.status.ready and not account.metadata.deleting:
        raise NotReady(Reason.ACCOUNT_NOT_READY, f"CloudflareAccount {name} is not Ready", requeue_after=RETRY_PARENT)
    try:
        token = await read_token(ctx, account)
    except NotReady as wait:
        raise NotReady(wait.reason, wait.message, requeue_after=RETRY_PARENT) from None
    return AccountLink(account.spec.account_id, ctx.cloudflare(token))
