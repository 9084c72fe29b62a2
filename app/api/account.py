"""CloudflareAccount: a Cloudflare account and the API token kflare uses for it (cluster-scoped)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn
from app.api.meta import Status
from app.api.refs import LocalTokenSecretReference, SecretReference, TokenSecretReference
from app.api.resource import Resource
from app.api.tenancy import NamespacePolicy

ACCOUNT_ID_PATTERN = r"^[0-9a-f]{32}$"
CloudflareID = Annotated[str, Field(min_length=32, max_length=32, pattern=ACCOUNT_ID_PATTERN)]
"""A Cloudflare object ID: 32 lower-case hexadecimal characters."""


class CloudflareAccountSpec(KflareModel):
    """The Cloudflare account and where its API token is stored."""

    account_id: CloudflareID | None = None
    """Cloudflare account ID (32 hexadecimal characters, shown in the dashboard's sidebar). Unset: the one account
    the token reaches, detected and recorded in `status.accountID`; a token that reaches none or several leaves the
    account not Ready with reason `AccountNotDetected`. Set, it always wins over what was detected."""
    token_secret_ref: TokenSecretReference
    """The Secret key holding the API token; the Secret may be in any namespace."""
    allowed_namespaces: NamespacePolicy | None = None
    """The namespaces whose resources may use this account (`from: All | Selector | None`). A resource in another
    namespace waits with reason `AccountNotPermitted` and causes no Cloudflare call. Unset: the controller's
    `--default-account-namespaces` (`All` unless the installation says otherwise)."""
    adoption_namespaces: NamespacePolicy | None = None
    """The namespaces whose resources may adopt objects that exist in Cloudflare and no resource owns (the
    `kflare.dev/adoption-policy` annotation), among those `allowedNamespaces` lets in. Unset: none when
    `allowedNamespaces` is set, else the controller's `--default-account-namespaces`."""


class CloudflareAccountStatus(Status):
    """What kflare last observed of the account."""

    account_name: Annotated[str, Field(max_length=1024)] | None = None
    """The account's name in Cloudflare."""
    protected_token_secret: SecretReference | None = None
    """The token Secret kflare holds the token-protection finalizer on for this account."""
    account_id: CloudflareID | None = None
    """The Cloudflare account ID kflare last used: `spec.accountID`, or when that is unset the one account the token
    reaches. Detected once, and again when the token changes, the spec changes or after a failed reconcile."""


class CloudflareAccount(Resource[CloudflareAccountSpec, CloudflareAccountStatus]):
    """CloudflareAccount gives kflare access to a Cloudflare account through an API token stored in a Secret.

    It is cluster-scoped: a namespaced kflare resource references it by name, if `allowedNamespaces` lets its
    namespace use it.
    """

    info = KindInfo(
        kind="CloudflareAccount",
        rank=10,
        permissions=(
            Permission(
                "Account · Account Settings · Read",
                "to check the token and read the account's name (every installation)",
            ),
        ),
        plural="cloudflareaccounts",
        short_names=("cfaccount",),
        scope="Cluster",
        columns=(
            PrinterColumn("Account ID", ".status.accountID"),
            PrinterColumn("Account Name", ".status.accountName"),
        ),
    )


class AccountSpec(KflareModel):
    """The Cloudflare account and the Secret of this namespace that holds the token."""

    account_id: CloudflareID | None = None
    """Cloudflare account ID (32 hexadecimal characters, shown in the dashboard's sidebar). Unset: the one account
    the token reaches, detected and recorded in `status.accountID` (as for a CloudflareAccount)."""
    token_secret_ref: LocalTokenSecretReference
    """The key of a Secret in the Account's namespace holding the API token."""


class Account(Resource[AccountSpec, CloudflareAccountStatus]):
    """Account gives the resources of its namespace, and only those, a Cloudflare account through a token stored in
    a Secret of the same namespace: a team brings its own token, which nothing outside the namespace can use.

    Resources name it with `accountRef: {name: <name>, kind: Account}`.
    """

    info = KindInfo(
        kind="Account",
        rank=40,
        permissions=(
            Permission(
                "Account · Account Settings · Read",
                "the same, for a team's own token (a namespaced Account); the team's token needs the permissions of"
                " the kinds it uses",
            ),
        ),
        plural="accounts",
        short_names=("cfnsaccount",),
        columns=(
            PrinterColumn("Account ID", ".status.accountID"),
            PrinterColumn("Account Name", ".status.accountName"),
        ),
    )


def effective_account_id(account: CloudflareAccount | Account | Mapping[str, object] | None) -> str | None:
    """The Cloudflare account ID an account resource (the model, or the object as the caches hold it) stands for:
    `spec.accountID` when set, else the one kflare detected (`status.accountID`), else None while it is not known.
    Everything that needs an account's ID reads it here, so a detected one is read from the status, never detected
    again by each dependant."""
    if account is None:
        return None
    if isinstance(account, CloudflareAccount | Account):
        return account.spec.account_id or account.status.account_id
    spec = account.get("spec")
    status = account.get("status")
    value = (spec.get("accountID") if isinstance(spec, Mapping) else None) or (
        status.get("accountID") if isinstance(status, Mapping) else None
    )
    return str(value) if value else None
