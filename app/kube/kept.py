"""A Secret the controller makes and keeps itself (its serving certificate, the Gateway class's xDS and origin
material), so that the chart carries no generated material and renders the same bytes every time.

Every replica runs the same steps: read the Secret, let the caller say whether what it holds will do or what it must
hold instead, and write that (a create when it is absent, a replace with the read resourceVersion as precondition
when it is not). A replica that loses a race (409: another created or replaced it first) reads the winner's and
asks again, so two replicas never keep two different Secrets."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, Final

from app.kube.client import JSON, SECRETS, KubeClient, KubeError

ATTEMPTS: Final = 3

Wanted = Callable[[dict[str, bytes] | None], dict[str, bytes] | None]
"""Given the Secret's data (None: no Secret, or one that cannot be decoded), None when it will do, else the data it
must hold."""


def decoded(data: Mapping[str, Any]) -> dict[str, bytes] | None:
    """The Secret's data as bytes; None when a value is not base64 (a Secret edited by hand, say)."""
    try:
        return {key: base64.b64decode(str(value), validate=True) for key, value in data.items()}
    except binascii.Error:
        return None


async def keep_secret(
    kube: KubeClient,
    namespace: str,
    name: str,
    wanted: Wanted,
    *,
    labels: Mapping[str, str],
    tls: bool = False,
) -> tuple[dict[str, bytes], bool]:
    """The Secret's data once it holds what `wanted` accepts, and whether this call wrote it. A new Secret is of type
    kubernetes.io/tls with `tls`, else Opaque; an existing one keeps its type (the API server refuses to change it)."""
    for _ in range(ATTEMPTS):
        try:
            found: JSON | None = await kube.get(SECRETS, name, namespace)
        except KubeError as exc:
            if not exc.not_found:
                raise
            found = None
        current = None if found is None else decoded(found.get("data") or {})
        new = wanted(current)
        if new is None and current is not None:
            return current, False
        if new is None:
            raise ValueError(f"nothing to write in the Secret {namespace}/{name}")
        metadata: JSON = {"name": name, "namespace": namespace, "labels": dict(labels)}
        body: JSON = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": found.get("type") if found is not None else "kubernetes.io/tls" if tls else "Opaque",
            "data": {key: base64.b64encode(value).decode() for key, value in new.items()},
        }
        try:
            if found is None:
                await kube.create(SECRETS, body, namespace)
            else:
                metadata["resourceVersion"] = str(found["metadata"].get("resourceVersion") or "")
                metadata["labels"] = {**(found["metadata"].get("labels") or {}), **labels}
                await kube.replace(SECRETS, body, namespace)
        except KubeError as exc:
            if not exc.conflict:
                raise
            continue
        return new, True
    raise RuntimeError(f"the Secret {namespace}/{name} kept changing under kflare's writes")
