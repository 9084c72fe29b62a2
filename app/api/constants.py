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


class DeletionPolicy(StrEnum):
    """What deleting a resource does to its Cloudflare object, as `kflare.dev/deletion-policy` and
    `--default-deletion-policy` spell it."""

    DELETE = "delete"
    """Delete the Cloudflare object, even if kflare adopted it."""
    RETAIN = "retain"
    """Keep the Cloudflare object."""


ADOPTION_POLICIES: Final = ("adopt", "adopt-or-create")

RECORD_ID_LABEL: Final = "kflare.dev/record-id"
ZONE_ID_LABEL: Final = "kflare.dev/zone-id"
ROUTE_ID_LABEL: Final = "kflare.dev/route-id"
KV_NAMESPACE_ID_LABEL: Final = "kflare.dev/kv-namespace-id"
R2_BUCKET_NAME_LABEL: Final = "kflare.dev/r2-bucket-name"
D1_DATABASE_ID_LABEL: Final = "kflare.dev/d1-database-id"
WORKER_NAME_LABEL: Final = "kflare.dev/worker-name"
TUNNEL_ID_LABEL: Final = "kflare.dev/tunnel-id"
TUNNEL_CONFIGURATION_LABEL: Final = "kflare.dev/configured-tunnel-id"
RULE_ID_LABEL: Final = "kflare.dev/rule-id"
IP_LIST_ID_LABEL: Final = "kflare.dev/ip-list-id"
MANAGED_TRANSFORM_ZONE_LABEL: Final = "kflare.dev/managed-transform-zone"
CLAIM_LABELS: Final = frozenset(
    {
        "kflare.dev/cloudflare-id",
        RECORD_ID_LABEL,
        ZONE_ID_LABEL,
        ROUTE_ID_LABEL,
        KV_NAMESPACE_ID_LABEL,
        R2_BUCKET_NAME_LABEL,
        D1_DATABASE_ID_LABEL,
        WORKER_NAME_LABEL,
        TUNNEL_ID_LABEL,
        TUNNEL_CONFIGURATION_LABEL,
        RULE_ID_LABEL,
        IP_LIST_ID_LABEL,
        MANAGED_TRANSFORM_ZONE_LABEL,
    }
)
"""The labels by which a resource claims its Cloudflare object. kflare trusts them as its own record, so only kflare
writes them: a manifest carrying one is refused at admission (it would take over whatever object the ID names)."""

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
    SECRET_NOT_FOUND = "SecretNotFound"
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
