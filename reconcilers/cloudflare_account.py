"""CloudflareAccount and Account: an API token that works, for an account it can reach (a CloudflareAccount's
serves the namespaces it allows, an Account's its own namespace only).

Nothing is created in Cloudflare. The reconcile reads the account with the token (one call), holds the
`kflare.dev/token-protection` finalizer on the token Secret while any account references it, and on deletion waits
for everything that uses the account, then lets the Secret go.

An account without `spec.accountID` uses the one account its token reaches: listed once (one more call), recorded in
`status.accountID`, where everything else reads it (`effective_account_id`). It is listed again only when the token
changes, the spec changes, or the last reconcile did not end Ready; not on drift checks, and not by dependants.
"""

from __future__ import annotations

import re
from typing import Generic, TypeVar

from app.api import Account, CloudflareAccount
from app.api.account import ACCOUNT_ID_PATTERN, effective_account_id
from app.api.constants import READY, TOKEN_PROTECTION_FINALIZER, Reason
from app.api.refs import SecretReference
from app.cloudflare.client import CloudflareClient
from app.cloudflare.errors import InvalidToken, NotFound, PermissionDenied, Terminal
from app.cloudflare.models import Account as Account_
from app.kube.client import JSON, SECRETS, KubeClient, KubeError
from app.kube.index import Ref
from reconcilers.capabilities import KeepsBeside, QualifiesReady, RecordsIdElsewhere
from reconcilers.context import AccountLink, Caches, Credentials
from reconcilers.credentials import read_token, token_location
from reconcilers.managed_kind import ManagedKind
from reconcilers.waiting import RETRY_PARENT, NotReady
from reconcilers.writer import logger_of

SECRET = "Secret"
ACCOUNT_KINDS = (CloudflareAccount.info.kind, Account.info.kind)
LISTED_ACCOUNTS = 5
"""How many of the accounts a token reaches a message names, when it reaches several."""


AnyAccount = TypeVar("AnyAccount", CloudflareAccount, Account)


class AccountTokenKind(
    ManagedKind[AnyAccount, AccountLink, Account_],
    RecordsIdElsewhere[AnyAccount],
    QualifiesReady[AnyAccount, Account_],
    KeepsBeside[AnyAccount, AccountLink, Account_],
    Generic[AnyAccount],
):
    """What both account kinds do: validate the token against the account, and protect its Secret."""

    ready_reason = Reason.VALIDATED
    ready_message = "the token is valid and the account is reachable"
    creates = False

    def __init__(self, caches: Caches, credentials: Credentials, kube: KubeClient) -> None:
        super().__init__(caches, credentials)
        self.kube = kube
        self._detected_with: dict[tuple[str, str], str] = {}
        """The fingerprint of the token each account's ID was last detected with (never the token): a token that
        changes is asked again. Lost on restart, when a Ready status is trusted until a call with it fails."""

    async def connect(self, obj: AnyAccount) -> AccountLink:
        namespace, name, _ = token_location(obj)
        await self._protect((namespace, name))
        previous = obj.status.protected_token_secret
        if previous is not None and (previous.namespace, previous.name) != (namespace, name):
            await self._release((previous.namespace, previous.name), obj.name)
        client = self.credentials.cloudflare(await read_token(self.credentials, obj))
        account_id = obj.spec.account_id or await self._detect(obj, client)
        # Set before the account is read: `object_id` takes it from here, and a successful reconcile writes it.
        obj.status.account_id = account_id
        return AccountLink(account_id, client)

    def object_id(self, obj: AnyAccount) -> str | None:
        return effective_account_id(obj)

    async def _detect(self, obj: AnyAccount, client: CloudflareClient) -> str:
        """The one account the token reaches: the recorded one while nothing it was detected from changed, else
        listed (one call)."""
        key = (obj.metadata.namespace or "", obj.name)
        recorded = obj.status.account_id
        fingerprint = client.fingerprint
        if recorded and _settled(obj) and self._detected_with.get(key, fingerprint) == fingerprint:
            return recorded
        try:
            accounts, total = await client.list_accounts()
        except PermissionDenied as denied:
            # As in `observe`: an unknown token and a refused one get the same answer; verifying tells which.
            status = await client.verify_token()
            if status.status != "active":
                raise InvalidToken(f"the token is {status.status}", status=denied.status) from None
            raise _not_detected(f"Cloudflare refused to list the accounts the token reaches: {denied}") from None
        except InvalidToken:
            raise  # a Terminal too, but the lifecycle says it as such
        except (NotFound, Terminal) as refused:
            # An account-owned token: Cloudflare lists accounts only for a user's token (400, code 1001).
            raise _not_detected(
                f"Cloudflare did not list the accounts the token reaches ({refused}); an account-owned token cannot"
                " list them"
            ) from None
        if total != 1 or len(accounts) != 1:
            named = ", ".join(f"{a.id} {a.name!r}" for a in accounts[:LISTED_ACCOUNTS])
            more = ", ..." if total > LISTED_ACCOUNTS else ""
            reach = "no account" if total == 0 else f"{total} accounts ({named}{more})"
            raise _not_detected(f"the token reaches {reach}")
        found = accounts[0].id
        if not re.fullmatch(ACCOUNT_ID_PATTERN, found):
            raise _not_detected(f"Cloudflare listed the account ID {found!r}, which is not 32 hexadecimal characters")
        self._detected_with[key] = fingerprint
        if found != recorded:
            logger_of(self.kind, key).info("detected the account the token reaches", extra={"id": found})
        return found

    def ready_state(self, obj: AnyAccount, observed: Account_) -> tuple[str, str]:
        if obj.spec.account_id:
            return self.ready_reason, self.ready_message
        return self.ready_reason, "the token is valid and reaches one account, used as spec.accountID is unset"

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
        obj.status.account_id = link.account_id
        namespace, name, _ = token_location(obj)
        obj.status.protected_token_secret = SecretReference(name=name, namespace=namespace)

    async def releasing(self, obj: AnyAccount) -> None:
        protected = obj.status.protected_token_secret
        namespace, name, _ = token_location(obj)
        if protected is not None:
            namespace, name = protected.namespace, protected.name
        await self._release((namespace, name), obj.name)

    async def _protect(self, key: tuple[str, str]) -> None:
        await self.credentials.secrets.wait_synced(key)
        secret = self.credentials.secrets.get(key)
        if secret is None:
            return
        finalizers: list[str] = list(secret["metadata"].get("finalizers") or [])
        if TOKEN_PROTECTION_FINALIZER in finalizers:
            return
        await self._set_secret_finalizers(secret, [*finalizers, TOKEN_PROTECTION_FINALIZER])

    async def _release(self, key: tuple[str, str], account: str) -> None:
        users = [
            r
            for r in self.caches.index.children(Ref(SECRET, *key))
            if r.kind in ACCOUNT_KINDS and (r.kind, r.name) != (self.kind, account)
        ]
        if users:
            return  # another account still relies on this Secret
        secret = self.credentials.secrets.get(key)
        if secret is None and not self.credentials.secrets.may_read(key[0]):
            return  # never protected: kflare may not write Secrets there (a namespace no longer granted)
        if secret is None:
            # The account's deletion may have ended the Secret's watch already (nothing references it any more):
            # read it once, so that its protection never outlives the last account using it.
            try:
                secret = await self.kube.get(SECRETS, key[1], key[0])
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
            await self.kube.patch(SECRETS, meta["name"], patch, meta["namespace"])
        except KubeError as exc:
            if not exc.not_found:
                raise


def _settled(obj: AnyAccount) -> bool:
    """Whether the account's last reconcile ended Ready, for its current spec."""
    ready = obj.status.condition(READY)
    return ready is not None and ready.status == "True" and ready.observed_generation == obj.metadata.generation


def _not_detected(why: str) -> NotReady:
    # Looked at again every minute: a token's reach can change in Cloudflare, which sends kflare no event.
    return NotReady(
        Reason.ACCOUNT_NOT_DETECTED,
        f"spec.accountID is unset and {why}; set spec.accountID to the account kflare should use",
        requeue_after=RETRY_PARENT,
    )


class CloudflareAccountKind(AccountTokenKind[CloudflareAccount]):
    model = CloudflareAccount


class AccountKind(AccountTokenKind[Account]):
    model = Account
