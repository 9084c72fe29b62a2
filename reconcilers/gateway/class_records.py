"""The class's DNSRecords in the records' cache: found by the indexes the publisher asks for on it
(`manager.Input.indexes`), by their tunnel label and by the tunnel document they were made for."""

from __future__ import annotations

from collections.abc import Mapping

from app.kube.informer import Informer
from reconcilers.gateway import raw
from reconcilers.gateway.publish import TUNNEL_ANNOTATION, TUNNEL_LABEL, TunnelKey, is_ours, tunnel_label

TUNNEL_INDEX = "gateway-tunnel"
"""The DNSRecords' cache's index of the class's records by their tunnel label: a tunnel's records are one lookup."""


def tunnel_labels(record: Mapping[str, object]) -> list[str]:
    label = raw.at(record, "metadata", "labels", TUNNEL_LABEL)
    return [str(label)] if label else []


DOCUMENT_INDEX = "gateway-tunnel-document"
"""The DNSRecords' cache's index of the class's records by the tunnel document they were made for (its annotation):
which tunnels have records is the index's values."""


def record_documents(record: Mapping[str, object]) -> list[str]:
    annotation = raw.at(record, "metadata", "annotations", TUNNEL_ANNOTATION)
    return [str(annotation)] if annotation else []


def documents_with_records(informer: Informer | None) -> set[str]:
    """The tunnel documents (`namespace/name`) the class's DNSRecords were made for."""
    if informer is None:
        return set()
    if DOCUMENT_INDEX in informer.indexers:
        return informer.index_values(DOCUMENT_INDEX)
    return {document for record in informer.list() for document in record_documents(record)}


def records_of(informer: Informer | None, tunnel: TunnelKey) -> list[Mapping[str, object]]:
    """The class's DNSRecords of `tunnel`, from the index (a scan of the cache only before the index is kept)."""
    if informer is None:
        return []
    if TUNNEL_INDEX in informer.indexers:
        return list(informer.by_index(TUNNEL_INDEX, tunnel_label(tunnel)))
    return [record for record in informer.list() if is_ours(record, tunnel)]
