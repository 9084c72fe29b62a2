"""CloudflareAccount and Account: an API token that works, for an account it can reach (a CloudflareAccount's
serves the namespaces it allows, an Account's its own namespace only).

Nothing is created in Cloudflare. The reconcile reads the account with the token (one call), holds the
`kflare.dev/token-protection` finalizer on the token Secret while any account references it, and on deletion waits
for everything that uses the account, then lets the Secret go.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from app.api import Account, CloudflareAccount
from app.api.constants import TOKEN_PROTECTION_FINALIZER, Reason
from app.api.refs import SecretReference
from app.cloudflare.errors import InvalidToken, NotFound, PermissionDenied
from app.cloudflare.models import Account as Account_
from app.kube.client import JSON, SECRETS, KubeError
from app.kube.index import Ref
from reconcilers.context import AccountLink
from reconcilers.credentials import read_token, token_location
from reconcilers.lifecycle import ManagedKind

SECRET = "Secret"
ACCOUNT_KINDS = (CloudflareAccount.info.kind, Account.info.kind)


AnyAccount = TypeVar("AnyAccount", CloudflareAccount, Account)


class AccountTokenKind(ManagedKind[AnyAccount, AccountLink, Account_], Generic[AnyAccount]):
    """What both account kinds do: validate the token against the account, and protect its Secret."""

    ready_reason = Reason.VALIDATED
    ready_message = "the token is valid and the account is reachable"
    creates = False

    @classmethod
    def parents_of(cls, raw: JSON) -> list[Ref]:
        ref = (raw.get("spec") or {}).get("tokenSecretRef") or {}
        namespace = ref.get("namespace") or raw["metadata"].get("namespace")
        if ref.get("name") and namespace:
            return [Ref(SECRET, namespace, ref["name"])]
        return []

    async def connect(self, obj: AnyAccount) -> AccountLink:
        namespace, name, _ = token_location(obj)
        await self._protect((namespace, name))
        previous = obj.status.protected_token_secret
        if previous is not None and (previous.namespace, previous.name) != (namespace, name):
            await self._release((previous.namespace, previous.name), obj.name)
        return AccountLink(obj.spec.account_id, self.ctx.cloudflare(await read_token(self.ctx, obj)))

    def object_id(self, obj: AnyAccount) -> str | None:
        return obj.spec.account_id

    async def observe(self, link: AccountLink, obj: AnyAccount, object_id: str) -> Account_ | None:
        try:
            return await link.client.get_account(object_id)
        except NotFound:
            return None
        except PermissionDenied as denied:
            # Cloudflare answers an unknown token and a token without access alike (403, 9109). Verifying the
            # token (one more call, only on this path) tells a user which of the two to fix.
            status = await link.client.verify_token(object_id)
            if status.status != "active":
                raise InvalidToken(f"the token is {status.status}", status=denied.status) from None
            raise

    def record(self, link: AccountLink, obj: AnyAccount, observed: Account_) -> None:
        obj.status.account_name = observed.name
        namespace, name, _ = token_location(obj)
        obj.status.protected_token_secret = SecretReference(name=name, namespace=namespace)

    async def releasing(self, obj: AnyAccount) -> None:
        protected = obj.status.protected_token_secret
        namespace, name, _ = token_location(obj)
        if protected is not None:
            namespace, name = protected.namespace, protected.name
        await self._release((namespace, name), obj.name)

    async def _protect(self, key: tuple[str, str]) -> None:
        await self.ctx.secrets.wait_synced(key)
        secret = self.ctx.secrets.get(key)
        if secret is None:
            return
        finalizers: list[str] = list(secret["metadata"].get("finalizers") or [])
        if TOKEN_PROTECTION_FINALIZER in finalizers:
            return
        await self._set_secret_finalizers(secret, [*finalizers, TOKEN_PROTECTION_FINALIZER])

    async def _release(self, key: tuple[str, str], account: str) -> None:
        users = [
            r
            for r in self.ctx.index.children(Ref(SECRET, *key))
            if r.kind in ACCOUNT_KINDS and (r.kind, r.name) != (self.kind, account)
        ]
        if users:
            return  # another account still relies on this Secret
        secret = self.ctx.secrets.get(key)
        if secret is None and not self.ctx.secrets.may_read(key[0]):
            return  # never protected: kflare may not write Secrets there (a namespace no longer granted)
        if secret is None:
            # The account's deletion may have ended the Secret's watch already (nothing references it any more):
            # read it once, so that its protection never outlives the last account using it.
            try:
                secret = await self.ctx.kube.get(SECRETS, key[1], key[0])
            except KubeError as exc:
                if exc.not_found:
                    return
                raise
        finalizers = list(secret["metadata"].get("finalizers") or [])
        if TOKEN_PROTECTION_FINALIZER in finalizers:
            finalizers.remove(TOKEN_PROTECTION_FINALIZER)
            await self._set_secret_finalizers(secret, finalizers)

    async def _set_secret_finalizers(self, secret: JSON, finalizers: list[str]) -> None:
        meta = secret["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            await self.ctx.kube.patch(SECRETS, meta["name"], patch, meta["namespace"])
        except KubeError as exc:
            if not exc.not_found:
                raise


class CloudflareAccountKind(AccountTokenKind[CloudflareAccount]):
    model = CloudflareAccount


class AccountKind(AccountTokenKind[Account]):
    model = Account
