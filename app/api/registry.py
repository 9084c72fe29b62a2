"""Every kind kflare serves, and what is derived from their declarations (`KindInfo`). A new kind is one module in
`app/api` and one line in `KINDS`; its reconciler is found by its model (`reconcilers.registry`)."""

from __future__ import annotations

from typing import Final

from app.api.account import Account, CloudflareAccount
from app.api.claim import CloudflareClaim
from app.api.dnsrecord import DNSRecord
from app.api.gateway_parameters import GatewayParameters
from app.api.grant import Grant
from app.api.iplist import IPList
from app.api.managedtransform import ManagedTransform
from app.api.resource import ResourceClass
from app.api.rules import RULE_KINDS
from app.api.storage import D1Database, KVNamespace, R2Bucket
from app.api.tunnel import Tunnel, TunnelConfiguration
from app.api.workers import WorkerRoute, WorkerScript
from app.api.zone import Zone

KINDS: Final[tuple[ResourceClass, ...]] = (
    CloudflareAccount,
    Zone,
    DNSRecord,
    Account,  # a namespaced account: a parent, as CloudflareAccount is
    KVNamespace,
    R2Bucket,
    D1Database,
    WorkerScript,
    WorkerRoute,
    Tunnel,
    TunnelConfiguration,
    IPList,
    *RULE_KINDS,
    ManagedTransform,
)

CONFIGURATION_KINDS: Final[tuple[ResourceClass, ...]] = (GatewayParameters, Grant)
"""Kinds that configure kflare and hold no Cloudflare object: they get a CRD (generated from their model like every
kind's) and are read by the reconcile that uses them, not reconciled, admitted or listed among the kinds above."""
INTERNAL_KINDS: Final[tuple[ResourceClass, ...]] = (CloudflareClaim,)
"""Kinds only kflare writes (the claims of adopted objects): a CRD, no webhook, no access for the namespaced roles."""
CRD_KINDS: Final[tuple[ResourceClass, ...]] = (*KINDS, *CONFIGURATION_KINDS, *INTERNAL_KINDS)


CLAIM_LABELS: Final = frozenset(model.info.claim_label for model in KINDS if model.info.claim_label)
"""The labels by which a resource claims its Cloudflare object. kflare trusts them as its own record, so only kflare
writes them: a manifest carrying one is refused at admission (it would take over whatever object the ID names)."""


class UnknownKind(LookupError):
    """No kflare kind has that kind name, plural, singular or short name."""


def _index() -> dict[str, ResourceClass]:
    index: dict[str, ResourceClass] = {}
    for model in CRD_KINDS:
        for name in model.info.names():
            if index.setdefault(name, model) is not model:
                raise RuntimeError(f"{name!r} names both {index[name].info.kind} and {model.info.kind}")
    return index


_BY_NAME: Final = _index()


def kind_for(name: str) -> ResourceClass:
    """The model of a kind, by kind (`DNSRecord`), plural (`dnsrecords`), singular or short name (`cfrecord`)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        known = ", ".join(model.info.kind for model in CRD_KINDS)
        raise UnknownKind(f"{name!r} is not a kflare kind (known: {known})") from None
