"""Tunnel: a remotely managed Cloudflare Tunnel (`config_src: cloudflare`) and the Secret holding its token.

Key for adoption: the name, among the account's live tunnels. Names are not unique over time (a deleted tunnel keeps
its name, and Cloudflare only keeps names unique among live tunnels), so only live tunnels are candidates, tunnels
another Tunnel claims are skipped, and the Event of an adoption says which one was taken and why. A tunnel with
`deleted_at` set counts as gone: its resource creates a new one.

Reads come from one listing of the account's live tunnels (`Collections`): observing, adoption, crash recovery and
drift checks of all the account's tunnels share it, so a drift check of a tunnel costs its share of the listing.

The token goes into the Secret `credentialsSecretRef` names, under `TUNNEL_TOKEN`, created with a controller
ownerReference to the Tunnel (garbage-collected with it). A Secret of that name the Tunnel does not control is never
touched (`CredentialsSecretConflict`); an owned one edited or deleted by hand is restored (it is watched: it is one of
the Tunnel's parents). When `credentialsSecretRef` moves to another Secret, the token is removed from the old one,
which the garbage collector deletes with the Tunnel (kflare may create and update Secrets, never delete them).

Cloudflare derives a tunnel's token from its ID and its secret, which kflare sets at creation and never changes, so
the token cannot drift and is not read on every drift check (Cloudflare cannot list tokens: that would be one call
per tunnel and round). The Secret carries `kflare.dev/token-digest`, a SHA-256 of the tunnel ID and the token it
holds; the token is read again only when the Secret is missing, or holds something else than what kflare wrote for
that tunnel (edited by hand, or the tunnel recreated with a new ID). The digest sits beside the token it digests, so
it tells whoever can read it nothing new; a new process reads no token for Secrets that are as kflare left them.
Deleting the Secret makes kflare read the token again and write it anew.

Renaming is in place (PATCH). Deletion, unless retained: the connectors are disconnected first, then the tunnel is
deleted (Cloudflare keeps it, soft-deleted). A Tunnel waits for its TunnelConfigurations and for the DNSRecords that
point at it (they are its dependants).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator

from app.api.constants import Reason
from app.api.tunnel import TOKEN_KEY, Tunnel, TunnelMetadata
from app.cloudflare.errors import NotFound
from app.cloudflare.models import Tunnel as CloudflareTunnel
from app.kube.client import JSON, SECRETS, KubeClient, KubeError
from reconcilers.account_members import AccountMember, AccountScope
from reconcilers.capabilities import KeepsBeside, NotesAdoption
from reconcilers.context import Caches, Credentials
from reconcilers.credentials import must_read
from reconcilers.managed_kind import Changes, resource_type
from reconcilers.waiting import RETRY_PARENT, NotReady
from reconcilers.writer import logger_of

MANAGED_BY = {"app.kubernetes.io/managed-by": "kflare"}
TOKEN_DIGEST_ANNOTATION = "kflare.dev/token-digest"


def controlled_by(secret: JSON, owner_uid: str) -> bool:
    return any(
        ref.get("controller") and ref.get("uid") == owner_uid for ref in secret["metadata"].get("ownerReferences") or []
    )


class TunnelKind(
    AccountMember[Tunnel, CloudflareTunnel],
    NotesAdoption[CloudflareTunnel],
    KeepsBeside[Tunnel, AccountScope, CloudflareTunnel],
):
    model = Tunnel
    status_id = "tunnel_id"

    def __init__(self, caches: Caches, credentials: Credentials, kube: KubeClient) -> None:
        super().__init__(caches, credentials)
        self.kube = kube  # writes the connector's token Secret

    def list_members(self, link: AccountScope) -> AsyncIterator[CloudflareTunnel]:
        return link.account.client.list_tunnels(link.account.account_id)

    async def get_member(self, link: AccountScope, object_id: str) -> CloudflareTunnel:
        return await link.account.client.get_tunnel(link.account.account_id, object_id)

    def listed_key(self, observed: CloudflareTunnel) -> str:
        return observed.name

    def gone(self, observed: CloudflareTunnel) -> bool:
        return observed.deleted  # only live tunnels are listed; a soft-deleted one read alone counts as gone

    def adoption_note(self, observed: CloudflareTunnel) -> str:
        return (
            f"adopted tunnel {observed.name} ({observed.id}, created {observed.created_at or 'at an unknown time'}): "
            "the live tunnel of that name no other Tunnel claims; Cloudflare keeps names unique among live tunnels "
            "only, so deleted tunnels of the same name were not considered"
        )

    async def connect(self, obj: Tunnel) -> AccountScope:
        if not obj.metadata.deleting:  # its token Secret is written once the tunnel exists: say so before making it
            must_read(self.credentials.secrets, obj.namespace or "", obj.spec.credentials_secret_ref.name)
        return await super().connect(obj)

    async def find(self, link: AccountScope, obj: Tunnel) -> CloudflareTunnel | None:
        named = await self.named(link, obj, obj.spec.name)
        live = [t for t in named if not t.deleted and not self.owners.claimed_by_other(t.id, obj)]
        live.sort(key=lambda t: (t.created_at or "", t.id))
        return live[0] if live else None

    async def create(self, link: AccountScope, obj: Tunnel) -> CloudflareTunnel:
        # The secret is Cloudflare's to keep: kflare hands cloudflared the token, never the secret itself.
        tunnel_secret = base64.b64encode(secrets.token_bytes(32)).decode()
        created = await link.account.client.create_tunnel(
            link.account.account_id, obj.spec.name, tunnel_secret=tunnel_secret
        )
        self.listings.put(link.collection, created)
        return created

    def diff(self, link: AccountScope, obj: Tunnel, observed: CloudflareTunnel) -> Changes:
        return {"name": obj.spec.name} if observed.name != obj.spec.name else {}

    async def update(
        self, link: AccountScope, obj: Tunnel, observed: CloudflareTunnel, changes: Changes
    ) -> CloudflareTunnel:
        renamed = await link.account.client.edit_tunnel(link.account.account_id, observed.id, changes)
        self.listings.put(link.collection, renamed)
        return renamed

    async def delete(self, link: AccountScope, obj: Tunnel, object_id: str) -> None:
        client, account_id = link.account.client, link.account.account_id
        try:
            await client.disconnect_tunnel(account_id, object_id)
        except NotFound:
            pass
        else:
            await client.delete_tunnel(account_id, object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: Tunnel, observed: CloudflareTunnel) -> None:
        obj.status.cloudflare_metadata = TunnelMetadata(tunnel_id=observed.id, status=observed.status)

    # ---- the token Secret --------------------------------------------------------------------------------------

    async def after_sync(self, link: AccountScope, obj: Tunnel, observed: CloudflareTunnel) -> None:
        namespace, name = obj.namespace or "", obj.spec.credentials_secret_ref.name
        await self.credentials.secrets.wait_synced((namespace, name))
        if not self._token_current(observed.id, namespace, name, obj.metadata.uid or ""):
            token = await link.account.client.get_tunnel_token(link.account.account_id, observed.id)
            encoded = base64.b64encode(token.reveal().encode()).decode()
            await self._write_secret(obj, namespace, name, encoded, token_digest(observed.id, encoded))
        previous = obj.status.credentials_secret_name
        if previous and previous != name:
            await self._strip_old_secret(obj, namespace, previous)
        obj.status.credentials_secret_name = name

    def _token_current(self, tunnel_id: str, namespace: str, name: str, uid: str) -> bool:
        """Whether the Secret, as cached, holds what kflare wrote there for this tunnel and is this Tunnel's."""
        secret = self.credentials.secrets.get((namespace, name))
        if secret is None or not controlled_by(secret, uid):
            return False
        held = (secret.get("data") or {}).get(TOKEN_KEY)
        digest = (secret["metadata"].get("annotations") or {}).get(TOKEN_DIGEST_ANNOTATION)
        return held is not None and digest == token_digest(tunnel_id, held)

    async def _write_secret(self, obj: Tunnel, namespace: str, name: str, encoded: str, digest: str) -> None:
        uid = obj.metadata.uid or ""
        current = self.credentials.secrets.get((namespace, name))
        if current is None:
            body: JSON = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": MANAGED_BY,
                    "annotations": {TOKEN_DIGEST_ANNOTATION: digest},
                    "ownerReferences": [self._owner_reference(obj)],
                },
                "type": "Opaque",
                "data": {TOKEN_KEY: encoded},
            }
            try:
                await self.kube.create(SECRETS, body, namespace)
            except KubeError as exc:
                if not exc.conflict:
                    raise
                # Made meanwhile (by someone, or by an earlier reconcile whose answer was lost): its watch event
                # brings this Tunnel back at once to judge it, as an existing Secret.
                return
            logger_of(self.kind, (namespace, obj.name)).info("wrote the tunnel token to Secret %s", name)
            return
        if not controlled_by(current, uid):
            raise NotReady(
                Reason.CREDENTIALS_SECRET_CONFLICT,
                f"Secret {name} exists and is not controlled by this Tunnel; kflare does not overwrite it: delete "
                "it, or point credentialsSecretRef at another name",
                requeue_after=RETRY_PARENT,
            )
        held = (current.get("data") or {}).get(TOKEN_KEY)
        annotations = current["metadata"].get("annotations") or {}
        if held != encoded or current.get("type", "Opaque") != "Opaque":
            patch: JSON = {"metadata": {"annotations": {TOKEN_DIGEST_ANNOTATION: digest}}, "data": {TOKEN_KEY: encoded}}
            await self.kube.patch(SECRETS, name, patch, namespace)
            logger_of(self.kind, (namespace, obj.name)).info("restored the tunnel token in Secret %s", name)
        elif annotations.get(TOKEN_DIGEST_ANNOTATION) != digest:
            # The right token without its digest (written by an older kflare, or the annotation edited away).
            patch = {"metadata": {"annotations": {TOKEN_DIGEST_ANNOTATION: digest}}}
            await self.kube.patch(SECRETS, name, patch, namespace)

    async def _strip_old_secret(self, obj: Tunnel, namespace: str, name: str) -> None:
        await self.credentials.secrets.wait_synced((namespace, name))
        old = self.credentials.secrets.get((namespace, name))
        if old is not None and controlled_by(old, obj.metadata.uid or "") and TOKEN_KEY in (old.get("data") or {}):
            patch = {"metadata": {"annotations": {TOKEN_DIGEST_ANNOTATION: None}}, "data": {TOKEN_KEY: None}}
            await self.kube.patch(SECRETS, name, patch, namespace)

    def _owner_reference(self, obj: Tunnel) -> JSON:
        return {
            "apiVersion": resource_type(type(self)).api_version,
            "kind": self.kind,
            "name": obj.name,
            "uid": obj.metadata.uid or "",
            "controller": True,
            "blockOwnerDeletion": True,
        }


def token_digest(tunnel_id: str, encoded: str) -> str:
    """What `kflare.dev/token-digest` says of a Secret holding `encoded` (the token, base64) for the tunnel."""
    return "sha256:" + hashlib.sha256(f"{tunnel_id}\n{encoded}".encode()).hexdigest()
