"""Names every kflare object and component agree on: finalizers, annotations, claim labels, condition reasons."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

FINALIZER: Final = "kflare.dev/finalizer"
"""Held by every kflare resource until its Cloudflare object is cleaned up (or retained)."""
TOKEN_PROTECTION_FINALIZER: Final = "kflare.dev/token-protection"
"""Held by a token Secret while a CloudflareAccount references it."""

DELETION_POLICY_ANNOTATION: Final = "kflare.dev/deletion-policy"
"""A `DeletionPolicy`; absent means `--default-deletion-policy`, or `retain` for an adopted object."""
ADOPTION_POLICY_ANNOTATION: Final = "kflare.dev/adoption-policy"
"""`adopt` or `adopt-or-create`; absent means an existing object is reported as `AlreadyExists`."""
ADOPTED_ANNOTATION: Final = "kflare.dev/adopted"
"""Set to `"true"` on a resource whose Cloudflare object kflare adopted."""
PAUSED_ANNOTATION: Final = "kflare.dev/paused"
"""`"true"` stops every Cloudflare call for the resource."""
CREATE_INTENT_ANNOTATION: Final = "kflare.dev/create-intent"
"""Written before a create: what the crash recovery of that create looks for (`reconcilers.lifecycle`)."""
KFLARE_ANNOTATIONS: Final = frozenset({ADOPTED_ANNOTATION, CREATE_INTENT_ANNOTATION})
"""Annotations only kflare writes: each is a record of how the resource came to own its object, which a tenant
could otherwise forge (an intent makes an existing object read as one this resource created)."""


class DeletionPolicy(StrEnum):
    """What deleting a resource does to its Cloudflare object, as `kflare.dev/deletion-policy` and
    `--default-deletion-policy` spell it."""

    DELETE = "delete"
    """Delete the Cloudflare object, even if kflare adopted it."""
    RETAIN = "retain"
    """Keep the Cloudflare object."""


ADOPTION_POLICIES: Final = ("adopt", "adopt-or-create")

READY: Final = "Ready"
"""The one condition type every kind reports."""


class Reason(StrEnum):
    """Reasons of the Ready condition."""

    VALIDATED = "Validated"
    SYNCED = "Synced"
    PAUSED = "Paused"
    ALREADY_EXISTS = "AlreadyExists"
    TERMINAL_ERROR = "TerminalError"
    API_ERROR = "APIError"
    INVALID_TOKEN = "InvalidToken"
    ACCOUNT_NOT_FOUND = "AccountNotFound"
    ACCOUNT_NOT_READY = "AccountNotReady"
    ACCOUNT_NOT_DETECTED = "AccountNotDetected"
    """An account without `spec.accountID` whose token reaches no account, or several, or cannot list them."""
    SECRET_NOT_FOUND = "SecretNotFound"
    NAMESPACE_NOT_GRANTED = "NamespaceNotGranted"
    """A Secret or ConfigMap in a namespace whose Secrets the installation gives kflare no access to."""
    TOKEN_KEY_MISSING = "TokenKeyMissing"
    ZONE_NOT_FOUND = "ZoneNotFound"
    ZONE_NOT_READY = "ZoneNotReady"
    TUNNEL_NOT_FOUND = "TunnelNotFound"
    TUNNEL_NOT_READY = "TunnelNotReady"
    TUNNEL_ALREADY_CONFIGURED = "TunnelAlreadyConfigured"
    CREDENTIALS_SECRET_CONFLICT = "CredentialsSecretConflict"
    IN_USE = "InUse"
    PATTERN_OUTSIDE_ZONE = "PatternOutsideZone"
    PATTERN_CONFLICT = "PatternConflict"
    WORKER_SCRIPT_NOT_FOUND = "WorkerScriptNotFound"
    WORKER_SCRIPT_NOT_READY = "WorkerScriptNotReady"
    ACCOUNT_MISMATCH = "AccountMismatch"
    SCRIPT_CONFIG_MAP_NOT_FOUND = "ScriptConfigMapNotFound"
    SCRIPT_KEY_MISSING = "ScriptKeyMissing"
    BINDING_SECRET_NOT_FOUND = "BindingSecretNotFound"
    BINDING_SECRET_KEY_MISSING = "BindingSecretKeyMissing"
    KV_NAMESPACE_NOT_FOUND = "KVNamespaceNotFound"
    KV_NAMESPACE_NOT_READY = "KVNamespaceNotReady"
    R2_BUCKET_NOT_FOUND = "R2BucketNotFound"
    R2_BUCKET_NOT_READY = "R2BucketNotReady"
    D1_DATABASE_NOT_FOUND = "D1DatabaseNotFound"
    D1_DATABASE_NOT_READY = "D1DatabaseNotReady"
    SCRIPT_TOO_LARGE = "ScriptTooLarge"
    TITLE_CONFLICT = "TitleConflict"
    NAME_CONFLICT = "NameConflict"
    BUCKET_NOT_EMPTY = "BucketNotEmpty"
    LIST_IN_USE = "ListInUse"
    RULESET_CONFLICT = "RulesetConflict"
    ALREADY_CONFIGURED = "AlreadyConfigured"
    HOSTNAME_NOT_COVERED = "HostnameNotCovered"
    LIST_NOT_FOUND = "ListNotFound"
    ACCOUNT_NOT_PERMITTED = "AccountNotPermitted"
    """The account's `allowedNamespaces` does not let the resource's namespace use it."""
    ADOPTION_NOT_PERMITTED = "AdoptionNotPermitted"
    """The account's `adoptionNamespaces` does not let the resource's namespace adopt existing objects."""
    HOSTNAME_NOT_GRANTED = "HostnameNotGranted"
    """The name is in a zone a Zone of another namespace manages, and that Zone grants this namespace no such name."""
    REFERENCE_NOT_PERMITTED = "ReferenceNotPermitted"
    """A reference to an object of another namespace that no Grant of that namespace allows."""
    CLAIMED_ELSEWHERE = "ClaimedElsewhere"
    """Another resource owns the Cloudflare object this one names or found: it is never adopted, written or
    deleted from here."""
