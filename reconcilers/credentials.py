"""The credential chain: resource -> its parents -> CloudflareAccount -> token Secret -> a Cloudflare client.

Read afresh on every reconcile from the caches (no Kubernetes call), so a rotated token is used at once.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from dataclasses import dataclass

from app.api import Account, CloudflareAccount
from app.api.account import effective_account_id
from app.api.constants import Reason
from app.api.refs import AccountReference
from app.kube.client import JSON
from app.kube.informer import Key, key_of
from app.kube.referenced import ReferencedObjects
from reconcilers.context import AccountLink, Caches, Credentials
from reconcilers.tenancy import account_policies, only_namespace, permits
from reconcilers.waiting import RETRY_PARENT, NotReady, Parent, can_serve

AnyAccount = CloudflareAccount | Account
NAMESPACED_ACCOUNT = "Account"


def account_key(raw: JSON) -> str | None:
    """The key of the account an object names (`spec.accountRef`): a CloudflareAccount's name, or
    `Account/<namespace>/<name>` for the namespaced Account of the object's namespace. Names hold no `/`, so the two
    never meet; collections and links are keyed by it."""
    ref = (raw.get("spec") or {}).get("accountRef") or {}
    name = ref.get("name")
    if not name:
        return None
    if ref.get("kind") == NAMESPACED_ACCOUNT:
        return f"{NAMESPACED_ACCOUNT}/{raw['metadata'].get('namespace') or ''}/{name}"
    return str(name)


def account_ref_key(ref: AccountReference, namespace: str | None) -> str:
    """`account_key` of a parsed reference, made in `namespace`."""
    if ref.kind == NAMESPACED_ACCOUNT:
        return f"{NAMESPACED_ACCOUNT}/{namespace or ''}/{ref.name}"
    return str(ref.name)


def account_object(key: str) -> tuple[str, str, str]:
    """The kind, namespace and name of the account `key` names."""
    if key.startswith(f"{NAMESPACED_ACCOUNT}/"):
        _, namespace, name = key.split("/", 2)
        return NAMESPACED_ACCOUNT, namespace, name
    return CloudflareAccount.info.kind, "", key


def token_location(account: AnyAccount) -> tuple[str, str, str]:
    """Where the account's token is: the Secret's namespace, name and key (an Account's is in its own namespace)."""
    if isinstance(account, CloudflareAccount):
        ref = account.spec.token_secret_ref
        return ref.namespace, ref.name, ref.key
    own = account.spec.token_secret_ref
    return str(account.metadata.namespace or ""), own.name, own.key


def must_read(objects: ReferencedObjects | None, namespace: str, name: str) -> None:
    """NotReady when the installation gives kflare no access to that namespace's Secrets (or ConfigMaps): said as
    such, rather than as a Secret not found, and before anything is made that would need it."""
    if objects is not None and not objects.may_read(namespace):
        kind = objects.rt.kind
        raise NotReady(
            Reason.NAMESPACE_NOT_GRANTED,
            f"{kind} {namespace}/{name}: this installation does not let kflare read {kind}s in namespace {namespace}"
            " (the chart's rbac.namespaces, the controller's --granted-namespaces)",
            requeue_after=RETRY_PARENT,
        )


async def read_token(credentials: Credentials, account: AnyAccount) -> str:
    """The account's API token from its Secret, or NotReady with the reason a user can act on."""
    namespace, name, key = token_location(account)
    must_read(credentials.secrets, namespace, name)
    # A watch for the Secret starts when the account is first seen; "not found" is only true once it has listed.
    with contextlib.suppress(TimeoutError):
        await credentials.secrets.wait_synced((namespace, name))
    secret = credentials.secrets.get((namespace, name))
    where = f"Secret {namespace}/{name}"
    if secret is None:
        raise NotReady(Reason.SECRET_NOT_FOUND, f"{where} not found")
    encoded = (secret.get("data") or {}).get(key)
    if encoded is None:
        raise NotReady(Reason.TOKEN_KEY_MISSING, f"{where} has no key {key!r}")
    try:
        value = base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise NotReady(Reason.INVALID_TOKEN, f"key {key!r} of {where} is not a text token") from None
    problem = token_problem(value)
    if problem is not None:
        raise NotReady(Reason.INVALID_TOKEN, f"key {key!r} of {where} {problem}")
    return value.rstrip("\r\n")


def token_problem(value: str) -> str | None:
    """What is wrong with a token value, said without showing it; None for a usable one.

    Cloudflare's tokens are printable ASCII without spaces. A trailing line break is what `kubectl create secret
    --from-file` keeps from the file, so it is dropped; anything else would reach the Authorization header, where it
    is refused locally or by Cloudflare with an unhelpful error."""
    token = value.rstrip("\r\n")
    if not token.strip():
        return "is empty"
    if token.lower().startswith("bearer "):
        return "starts with 'Bearer ': store the token alone, kflare adds the scheme"
    for position, char in enumerate(token, start=1):
        if char in "\r\n":
            return f"has a line break at character {position}: store one token, on one line"
        if char.isspace():
            return f"has white space at character {position}"
        if not char.isascii():
            return f"has a non-ASCII character at character {position}"
        if not char.isprintable():
            return f"has a control character at character {position}"
    return None


async def ready_account(credentials: Credentials, key: str, namespace: str | None = None) -> AccountLink:
    """The account `key` names (`account_key`), if it exists, is Ready and lets `namespace` (the caller's) use it,
    with a client for its token. A namespace it does not let in learns nothing more of it, and causes no Cloudflare
    call."""
    link = await _account_link(credentials, key)
    if not permits(credentials.caches, link.users, namespace):
        kind, _, name = account_object(key)
        raise NotReady(
            Reason.ACCOUNT_NOT_PERMITTED,
            f"{kind} {name} does not let namespace {namespace} use it (its spec.allowedNamespaces)",
            requeue_after=RETRY_PARENT,
        )
    return link


async def _account_link(credentials: Credentials, key: str) -> AccountLink:
    kind, where, name = account_object(key)
    raw: JSON | None = credentials.caches.cached(kind, name, where or None)
    if raw is None:
        raise NotReady(
            Reason.ACCOUNT_NOT_FOUND, f"{kind} {name} not found", requeue_after=RETRY_PARENT, parent_gone=True
        )
    links = credentials.account_links
    known = links.get(key)
    if known is not None and known[0] is raw and credentials.secrets.get(known[1]) is known[2]:
        return known[3]  # neither the account nor its Secret changed since: the same link
    account: AnyAccount = (Account if kind == NAMESPACED_ACCOUNT else CloudflareAccount).model_validate(raw)
    # An account being deleted waits (InUse) for its dependants, which need its token to clean up. One whose last
    # check failed for a passing reason, after it had been validated, still serves.
    serving = can_serve(raw) and account.status.account_name is not None
    if not (account.status.ready or serving) and not account.metadata.deleting:
        raise NotReady(Reason.ACCOUNT_NOT_READY, f"{kind} {name} is not Ready", requeue_after=RETRY_PARENT)
    try:
        token = await read_token(credentials, account)
    except NotReady as wait:
        raise NotReady(wait.reason, wait.message, requeue_after=RETRY_PARENT) from None
    if isinstance(account, CloudflareAccount):
        users, adopters = account_policies(account, credentials.default_account_namespaces)
    else:
        users = adopters = only_namespace(where)  # a team's own token: its namespace's, and only its
    account_id = effective_account_id(account)
    if account_id is None:
        # Only an account being deleted gets here without one: it was never Ready, so nothing was made through it.
        raise NotReady(Reason.ACCOUNT_NOT_READY, f"{kind} {name} has no account ID yet", requeue_after=RETRY_PARENT)
    link = AccountLink(account_id, credentials.cloudflare(token), users, adopters)
    secret_namespace, secret_name, _ = token_location(account)
    secret = credentials.secrets.get((secret_namespace, secret_name))
    if secret is not None:
        links[key] = (raw, (secret_namespace, secret_name), secret, link)
    return link


@dataclass(frozen=True)
class ZoneLink:
    """A Zone that can serve its children: its Cloudflare ID, and its account's link."""

    account: AccountLink
    zone_id: str
    zone_name: str
    account_ref: str = ""
    """The name of the Zone's CloudflareAccount."""


ZONE_ID_INDEX = "zone-id"
"""Zone's index of the Cloudflare zone each Zone names, as its status says (what `ready_zone` reads)."""


def zone_ids(raw: JSON) -> list[str]:
    """A Zone's values in ZONE_ID_INDEX."""
    value = ((raw.get("status") or {}).get("cloudflareMetadata") or {}).get("zoneID")
    return [str(value)] if value else []


def zones_of(caches: Caches, zone_id: str) -> list[Key]:
    """The Zones naming a Cloudflare zone: Zones of two namespaces may name one domain."""
    informer = caches.informer_of("Zone")
    return [] if informer is None else [key_of(found) for found in informer.by_index(ZONE_ID_INDEX, zone_id)]


async def ready_zone(credentials: Credentials, zone: Parent, namespace: str | None) -> ZoneLink:
    """The Zone a resource of `namespace` references (`ManagedKind.parent`), once it can serve its children (a Zone
    being deleted still serves: it waits for them to clean up), with its account's link."""
    zone_id = zone.serving()
    raw = zone.raw
    spec = raw.get("spec") or {}
    account_ref = account_key(raw) or ""
    account = await ready_account(credentials, account_ref, namespace)
    return ZoneLink(account, str(zone_id), str(spec.get("name", "")), account_ref)


def zone_ref_key(raw: JSON) -> list[str]:
    """An index of the objects that name a Zone (`spec.zoneRef`), by the Zone as `namespace/name`."""
    name = ((raw.get("spec") or {}).get("zoneRef") or {}).get("name")
    return [f"{zone_namespace(raw)}/{name}"] if name else []


def zone_namespace(raw: JSON) -> str:
    """The namespace of the Zone an object names: `zoneRef.namespace`, else the object's own."""
    ref = (raw.get("spec") or {}).get("zoneRef") or {}
    return str(ref.get("namespace") or raw["metadata"].get("namespace") or "")


def account_id_of(caches: Caches, account: str | None) -> str | None:
    """The Cloudflare account ID the account `account` (its key) names (two may name one): `effective_account_id` of
    the cached account; None while it is not known."""
    if not account:
        return None
    kind, namespace, name = account_object(account)
    return effective_account_id(caches.cached(kind, name, namespace or None))
