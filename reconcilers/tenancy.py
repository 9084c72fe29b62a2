"""Which namespaces may use an account, and adopt through it: the accounts' policies read against the cache of
namespaces' labels."""

from __future__ import annotations

from app.api import CloudflareAccount
from app.api.tenancy import NO_NAMESPACES, NamespacePolicy
from reconcilers.context import AccountLink, Context


def account_policies(ctx: Context, account: CloudflareAccount) -> tuple[NamespacePolicy, NamespacePolicy]:
    """Who may use the account, and who may adopt through it: its own policies, else the controller's default. An
    account that says who may use it and not who may adopt lets nobody adopt: adoption takes over what others made,
    and is granted on its own."""
    spec = account.spec
    users = spec.allowed_namespaces or ctx.default_account_namespaces
    if spec.adoption_namespaces is not None:
        adopters = spec.adoption_namespaces
    else:
        adopters = NO_NAMESPACES if spec.allowed_namespaces is not None else ctx.default_account_namespaces
    return users, adopters


def permits(ctx: Context, policy: NamespacePolicy, namespace: str | None) -> bool:
    """Whether `policy` lets `namespace` in (a cluster-scoped caller, None, is the administrator's own)."""
    return namespace is None or policy.admits(namespace, ctx.namespace_labels(namespace))


def may_adopt(ctx: Context, account: AccountLink, namespace: str | None) -> bool:
    """Whether a resource of `namespace` may adopt through the account: both of its policies let it in."""
    return permits(ctx, account.users, namespace) and permits(ctx, account.adopters, namespace)
