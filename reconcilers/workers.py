"""WorkerScript: a Worker of an account (its routes are `reconcilers.worker_route`'s).

The Worker is uploaded whole, as Cloudflare's multipart form, only when what would be uploaded changes:
the SHA-256 of the code, the format, the compatibility date and flags and each binding's name, type and value (a
Secret contributes its UID, resourceVersion and key, never its value; a KVNamespace its namespace ID, an R2Bucket
its name and jurisdiction, a D1Database its UUID) is kept in `status.appliedHash`. It is also re-uploaded when the
account's listing shows a `modified_on` other than the one kflare recorded (a change made outside kflare), or no
Worker at all. One listing per account serves every Worker's observe and drift check. A rotated Secret or an edited
ConfigMap changes the hash (their watches enqueue the Worker), so it is uploaded once; an idle reconcile uploads
nothing. Secret values go to Cloudflare in the upload and nowhere else: not in status, logs, Events or errors.

A bound object must exist, share the Worker's CloudflareAccount and be Ready (with its ID), else a reason naming it.
An existing Worker of the name is `AlreadyExists` unless an adoption policy says otherwise; one another WorkerScript
manages is never taken. Deleting deletes the Worker (Cloudflare deletes its routes with it) unless retained; routes
do not hold a Worker's deletion.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from app.api.constants import Reason
from app.api.links import reference_fields
from app.api.refs import BoundObjectReference
from app.api.workers import SCRIPT_SIZE_LIMIT, WorkerBinding, WorkerScript, WorkerScriptMetadata, too_large
from app.cloudflare.calls import JsonBody
from app.cloudflare.models import WorkerScript as CloudflareScript
from app.kube.client import JSON
from app.kube.index import Ref
from app.kube.referenced import ReferencedObjects
from reconcilers.account_members import AccountMemberBase, AccountScope, account_name
from reconcilers.capabilities import ChoosesDependants, KeepsBeside, RecordsIdElsewhere
from reconcilers.claims import holder_of
from reconcilers.context import Caches, Credentials
from reconcilers.credentials import account_id_of, account_ref_key, must_read
from reconcilers.holders import CLAIM_INDEX
from reconcilers.managed_kind import Changes
from reconcilers.tenancy import reference_granted
from reconcilers.waiting import RETRY_PARENT, NotReady, parent_found
from reconcilers.writer import logger_of

ENTRY_MODULE = "worker.js"
BOUND_KINDS = reference_fields(WorkerBinding, BoundObjectReference)


@dataclass(frozen=True)
class Upload:
    """What would be uploaded, and its hash. `metadata` holds secret values: never log or store it."""

    metadata: dict[str, JsonBody] = field(repr=False)
    code: bytes = field(repr=False)
    content_type: str
    digest: str
    revoked: tuple[str, ...] = ()
    """Bindings left out because their grant was taken back (each said as the refusal): the Worker is uploaded
    without them, and waits with that reason."""


@dataclass(frozen=True)
class WorkerLink(AccountScope):
    """The account's collection of Workers, and what would be uploaded (None while the resource is being
    deleted)."""

    upload: Upload | None = None


def _decode(value: str | None) -> str | None:
    if value is None:
        return None
    with contextlib.suppress(binascii.Error, UnicodeDecodeError):
        return base64.b64decode(value, validate=True).decode()
    return None


class WorkerScriptKind(
    AccountMemberBase[WorkerScript, WorkerLink, CloudflareScript, CloudflareScript],
    ChoosesDependants,
    KeepsBeside[WorkerScript, WorkerLink, CloudflareScript],
    RecordsIdElsewhere[WorkerScript],
):
    model = WorkerScript
    serves_once = "modified_on"  # routes wait for the script to be uploaded

    def __init__(self, caches: Caches, credentials: Credentials, configmaps: ReferencedObjects | None) -> None:
        super().__init__(caches, credentials)
        self.configmaps = configmaps
        # resource UID -> (hash, modified_on) this process last uploaded; dropped when the resource is released
        self._uploaded: dict[str, tuple[str, str | None]] = {}

    def dependants(self, key: tuple[str, str], referencing: list[Ref]) -> list[Ref]:
        # Routes do not hold their Worker: Cloudflare deletes them with it, and a WorkerRoute whose Worker is gone
        # says so (and cleans up under its own policy).
        return [r for r in referencing if r.kind != "WorkerRoute"]

    # ---- what is uploaded --------------------------------------------------------------------------------------

    async def connect(self, obj: WorkerScript) -> WorkerLink:
        scope = await self.account_scope(obj)
        upload = None if obj.metadata.deleting else await self._upload(obj)
        return WorkerLink(scope.account, scope.collection, scope.partition, upload)

    async def after_sync(self, link: WorkerLink, obj: WorkerScript, observed: CloudflareScript) -> None:
        if link.upload is not None and link.upload.revoked:
            raise NotReady(Reason.REFERENCE_NOT_PERMITTED, "; ".join(link.upload.revoked), requeue_after=RETRY_PARENT)

    async def released(self, obj: WorkerScript) -> None:
        self._uploaded.pop(obj.metadata.uid or "", None)

    def _not_anothers(self, obj: WorkerScript, kind: str, object_id: str, binding: str) -> None:
        """A binding by raw ID or name reaches what it names in the account: refused when a resource of another
        namespace owns that object (in the same account), whose data this namespace was never given."""
        informer = self.caches.informer_of(kind)
        mine = account_id_of(self.caches, account_ref_key(obj.spec.account_ref, obj.namespace))
        for other in [] if informer is None else informer.by_index(CLAIM_INDEX, object_id):
            if (other["metadata"].get("namespace") or "") == (obj.namespace or ""):
                continue
            theirs = account_id_of(self.caches, account_name(other))
            if theirs is None or theirs == mine:
                raise NotReady(
                    Reason.CLAIMED_ELSEWHERE,
                    f"binding {binding} names {object_id}, which {holder_of(other).described_to(obj.namespace)}"
                    " owns: bind objects of this namespace (by reference)",
                    requeue_after=RETRY_PARENT,
                )

    async def _upload(self, obj: WorkerScript) -> Upload:
        spec = obj.spec
        namespace = obj.namespace or ""
        code = await self._code(obj)
        size = len(code)
        if size > SCRIPT_SIZE_LIMIT:
            raise NotReady(Reason.SCRIPT_TOO_LARGE, too_large(size))
        bindings: list[dict[str, JsonBody]] = []
        hashed: list[object] = []  # only hashed
        revoked: list[str] = []
        for binding in spec.bindings or []:
            source = binding.source
            if binding.plain_text is not None:
                bindings.append({"type": "plain_text", "name": binding.name, "text": binding.plain_text})
                hashed.append([binding.name, "plain_text", binding.plain_text])
            elif binding.secret_key_ref is not None:
                ref = binding.secret_key_ref
                secret = await self._referenced(self.credentials.secrets, namespace, ref.name)
                where = f"Secret {namespace}/{ref.name}"
                if secret is None:
                    raise NotReady(Reason.BINDING_SECRET_NOT_FOUND, f"{where} of binding {binding.name} not found")
                value = _decode((secret.get("data") or {}).get(ref.key))
                if not value:
                    raise NotReady(
                        Reason.BINDING_SECRET_KEY_MISSING,
                        f"{where} of binding {binding.name} has no key {ref.key!r} (or it is empty or not text)",
                    )
                meta = secret["metadata"]
                bindings.append({"type": "secret_text", "name": binding.name, "text": value})
                hashed.append(
                    [binding.name, "secret_text", f"{meta.get('uid')}/{meta.get('resourceVersion')}/{ref.key}"]
                )
            elif binding.kv_namespace_id is not None:
                self._not_anothers(obj, "KVNamespace", binding.kv_namespace_id, binding.name)
                bindings.append({"type": "kv_namespace", "name": binding.name, "namespace_id": binding.kv_namespace_id})
                hashed.append([binding.name, "kv_namespace", binding.kv_namespace_id])
            elif binding.r2_bucket_name is not None:
                self._not_anothers(obj, "R2Bucket", binding.r2_bucket_name, binding.name)
                bindings.append({"type": "r2_bucket", "name": binding.name, "bucket_name": binding.r2_bucket_name})
                hashed.append([binding.name, "r2_bucket", binding.r2_bucket_name])
            else:
                kind = BOUND_KINDS[source]
                ref = getattr(binding, source)
                try:
                    bound = self._bound(obj, kind, Ref(kind, ref.namespace or namespace, ref.name), binding.name)
                except NotReady as refused:
                    if refused.reason != Reason.REFERENCE_NOT_PERMITTED or obj.status.applied_hash is None:
                        raise
                    # Uploaded with it before, and its grant is gone: the access goes now, not at the next change.
                    revoked.append(refused.message)
                    continue
                meta = (bound.get("status") or {}).get("cloudflareMetadata") or {}
                entry: dict[str, JsonBody]
                if kind == "KVNamespace":
                    entry = {"type": "kv_namespace", "name": binding.name, "namespace_id": meta["namespaceID"]}
                elif kind == "R2Bucket":
                    entry = {"type": "r2_bucket", "name": binding.name, "bucket_name": bound["spec"]["name"]}
                    jurisdiction = bound["spec"].get("jurisdiction") or "default"
                    if jurisdiction != "default":
                        entry["jurisdiction"] = jurisdiction
                else:
                    entry = {"type": "d1", "name": binding.name, "id": meta["databaseID"]}
                bindings.append(entry)
                hashed.append(sorted(entry.items()))
        metadata: dict[str, JsonBody] = {"bindings": bindings}
        if spec.format == "module":
            metadata["main_module"] = ENTRY_MODULE
            content_type = "application/javascript+module"
        else:
            metadata["body_part"] = ENTRY_MODULE
            content_type = "application/javascript"
        if spec.compatibility_date:
            metadata["compatibility_date"] = spec.compatibility_date
        if spec.compatibility_flags:
            metadata["compatibility_flags"] = list(spec.compatibility_flags)
        document = {
            "code": hashlib.sha256(code).hexdigest(),
            "format": spec.format,
            "compatibilityDate": spec.compatibility_date,
            "compatibilityFlags": spec.compatibility_flags or [],
            "bindings": hashed,
        }
        digest = hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()
        return Upload(metadata, code, content_type, digest, tuple(revoked))

    @staticmethod
    async def _referenced(objects: ReferencedObjects | None, namespace: str, name: str) -> JSON | None:
        if objects is None:
            return None
        must_read(objects, namespace, name)
        with contextlib.suppress(TimeoutError):
            await objects.wait_synced((namespace, name))
        found: JSON | None = objects.get((namespace, name))
        return found

    async def _code(self, obj: WorkerScript) -> bytes:
        if obj.spec.script is not None:
            return obj.spec.script.encode()
        ref = obj.spec.script_config_map_ref
        assert ref is not None
        namespace = obj.namespace or ""
        config_map = await self._referenced(self.configmaps, namespace, ref.name)
        where = f"ConfigMap {namespace}/{ref.name}"
        if config_map is None:
            raise NotReady(Reason.SCRIPT_CONFIG_MAP_NOT_FOUND, f"{where} not found")
        value = (config_map.get("data") or {}).get(ref.key)
        if value:
            return str(value).encode()
        binary = (config_map.get("binaryData") or {}).get(ref.key)
        if binary:
            with contextlib.suppress(binascii.Error):
                return base64.b64decode(binary)
        raise NotReady(Reason.SCRIPT_KEY_MISSING, f"{where} has no key {ref.key!r} (or it is empty)")

    def _bound(self, obj: WorkerScript, kind: str, bound: Ref, binding: str) -> JSON:
        """A bound KVNamespace, R2Bucket or D1Database: in this namespace or granted to it by its own, there, of the
        same account, Ready (or being deleted, which waits for this Worker) and with its ID; else the reason, naming
        it."""
        namespace, name = bound.namespace, bound.name
        shown = f"{namespace}/{name} (binding {binding})"
        where = f"{kind} {shown}"
        if not reference_granted(self.caches, self.kind, obj.namespace or "", kind, bound):
            # Said before anything of the object is looked at: whether it exists is its namespace's business.
            raise NotReady(
                Reason.REFERENCE_NOT_PERMITTED,
                f"{where}: no Grant in namespace {namespace} lets WorkerScripts of {obj.namespace} bind it",
                requeue_after=RETRY_PARENT,
            )
        found = parent_found(self.caches, (kind, namespace, name), shown=shown, gone=False)
        raw = found.raw
        theirs, mine = account_name(raw), account_ref_key(obj.spec.account_ref, obj.namespace)
        if theirs != mine and account_id_of(self.caches, theirs) != account_id_of(self.caches, mine):
            raise NotReady(Reason.ACCOUNT_MISMATCH, f"{where} is in another Cloudflare account than this Worker")
        found.serving()  # one being deleted waits for this Worker
        return raw

    # ---- the Worker in Cloudflare ------------------------------------------------------------------------------

    def list_members(self, link: WorkerLink) -> AsyncIterator[CloudflareScript]:
        return link.account.client.list_worker_scripts(link.account.account_id)

    async def get_member(self, link: WorkerLink, object_id: str) -> CloudflareScript:
        return await self.fresh_member(link, object_id)  # Cloudflare reads a Worker's metadata only by listing

    def listed_key(self, listed: CloudflareScript) -> str:
        return listed.id

    async def observed_from(self, link: WorkerLink, listed: CloudflareScript) -> CloudflareScript:
        return listed

    def object_id(self, obj: WorkerScript) -> str | None:
        meta = obj.status.cloudflare_metadata
        return obj.spec.name if meta is not None and meta.modified_on else None

    def _check_claim(self, obj: WorkerScript) -> None:
        informer = self.caches.informer_of(self.kind)
        for other in [] if informer is None else informer.by_index(CLAIM_INDEX, obj.spec.name):
            mine = account_ref_key(obj.spec.account_ref, obj.namespace)
            if other["metadata"].get("uid") != obj.metadata.uid and account_name(other) == mine:
                owner = holder_of(other).described_to(obj.metadata.namespace)
                raise NotReady(
                    Reason.ALREADY_EXISTS,
                    f"Worker {obj.spec.name} is managed by {owner}",
                    requeue_after=RETRY_PARENT,
                )

    async def find(self, link: WorkerLink, obj: WorkerScript) -> CloudflareScript | None:
        self._check_claim(obj)
        named = await self.named(link, obj, obj.spec.name)
        return named[0] if named else None

    async def _put(self, link: WorkerLink, obj: WorkerScript) -> CloudflareScript:
        upload = link.upload
        assert upload is not None
        uploaded = await link.account.client.upload_worker_script(
            link.account.account_id,
            obj.spec.name,
            upload.metadata,
            [(ENTRY_MODULE, upload.code, upload.content_type)],
        )
        self.listings.put(link.collection, uploaded)
        self._uploaded[obj.metadata.uid or ""] = (upload.digest, uploaded.modified_on)
        logger_of(self.kind, (obj.namespace or "", obj.name)).info(
            "uploaded Worker", extra={"worker": obj.spec.name, "hash": upload.digest, "bytes": len(upload.code)}
        )
        return uploaded

    async def create(self, link: WorkerLink, obj: WorkerScript) -> CloudflareScript:
        return await self._put(link, obj)

    def diff(self, link: WorkerLink, obj: WorkerScript, observed: CloudflareScript) -> Changes:
        status = obj.status
        applied = status.applied_hash
        recorded = status.cloudflare_metadata.modified_on if status.cloudflare_metadata else None
        last = self._uploaded.get(obj.metadata.uid or "")
        if last is not None and last[1] == observed.modified_on:
            applied, recorded = last  # this process uploaded it (just now, before the status says so)
        changes: Changes = {}
        if (link.upload.digest if link.upload is not None else None) != applied:
            changes["content"] = "what is uploaded changed"
        if recorded != observed.modified_on:
            changes["modifiedOn"] = "changed outside kflare" if recorded else "not uploaded by this resource"
        return changes

    async def update(
        self, link: WorkerLink, obj: WorkerScript, observed: CloudflareScript, changes: Changes
    ) -> CloudflareScript:
        return await self._put(link, obj)

    async def delete(self, link: WorkerLink, obj: WorkerScript, object_id: str) -> None:
        await link.account.client.delete_worker_script(link.account.account_id, object_id)
        self.listings.drop(link.collection, object_id)

    def record(self, link: WorkerLink, obj: WorkerScript, observed: CloudflareScript) -> None:
        obj.status.cloudflare_metadata = WorkerScriptMetadata(etag=observed.etag, modified_on=observed.modified_on)
        if link.upload is not None:
            obj.status.applied_hash = link.upload.digest
