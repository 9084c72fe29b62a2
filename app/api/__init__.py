"""The kflare API (`kflare.dev/v1alpha1`): pydantic models of every kind, the single source of truth.

The CRDs are generated from these models (`app.api.crds`, `kflare crds`), the admission webhook validates with
them (`validate_object`, `immutable_violations`), and the reconcilers read and write objects through them.
"""

from __future__ import annotations

from app.api.account import Account, CloudflareAccount, CloudflareAccountSpec, CloudflareAccountStatus
from app.api.base import (
    API_VERSION,
    CATEGORY,
    GROUP,
    VERSION,
    FieldError,
    KflareModel,
    KindInfo,
    PrinterColumn,
    wire_name,
)
from app.api.dnsrecord import DNSRecord, DNSRecordMetadata, DNSRecordSpec, DNSRecordStatus
from app.api.meta import Condition, ConditionStatus, ObjectMeta, Status
from app.api.refs import KeyReference, LocalObjectReference, SecretReference, TokenSecretReference
from app.api.registry import KINDS, UnknownKind, kind_for
from app.api.resource import AnyResource, Resource, ResourceClass
from app.api.validation import immutable_violations, unknown_fields, validate_object, validate_update
from app.api.zone import Zone, ZoneMetadata, ZoneSpec, ZoneStatus

__all__ = [
    "API_VERSION",
    "CATEGORY",
    "GROUP",
    "KINDS",
    "VERSION",
    "Account",
    "AnyResource",
    "CloudflareAccount",
    "CloudflareAccountSpec",
    "CloudflareAccountStatus",
    "Condition",
    "ConditionStatus",
    "DNSRecord",
    "DNSRecordMetadata",
    "DNSRecordSpec",
    "DNSRecordStatus",
    "FieldError",
    "KeyReference",
    "KflareModel",
    "KindInfo",
    "LocalObjectReference",
    "ObjectMeta",
    "PrinterColumn",
    "Resource",
    "ResourceClass",
    "SecretReference",
    "Status",
    "TokenSecretReference",
    "UnknownKind",
    "Zone",
    "ZoneMetadata",
    "ZoneSpec",
    "ZoneStatus",
    "immutable_violations",
    "kind_for",
    "parse",
    "unknown_fields",
    "validate_object",
    "validate_update",
    "wire_name",
]


def parse(obj: dict[str, object]) -> AnyResource:
    """An object as JSON (with its `kind`) as the model of its kind."""
    return kind_for(str(obj.get("kind", ""))).model_validate(obj)
