"""A Secret the controller makes and keeps itself (its serving certificate, the Gateway class's xDS and origin
material), so that the chart carries no generated material and renders the same bytes every time.

Every replica runs the same steps: read the Secret, let the caller say whether what it holds will do or what it must
hold instead, and write that (a create when it is absent, a replace with the read resourceVersion as precondition
when it is not). A replica that loses a race (409: another created or replaced it first) reads the winner's and
asks again, so two replicas never keep two different Secrets."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Final

from app.kube.client import JSON, SECRETS, KubeClient, KubeError

log = logging.getLogger(__name__)

ATTEMPTS: Final = 3
CHECK_EVERY: Final = 3600.0
RETRY: Final = 30.0

Wanted = Callable[[dict[str, bytes] | None], dict[str, bytes] | None]
"""Given the Secret's data (None: no Secret, or one that cannot be decoded), None when it will do, else the data it
must hold."""


def decoded(data: Mapping[str, object]) -> dict[str, bytes] | None:
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


def replace_files(directory: Path, files: Mapping[str, bytes], order: Sequence[str]) -> bool:
    """Write the files of `order` into `directory`, each whole (a temporary file renamed over it: a listener never
    reads half of one) and only when it changed, in that order (the one a reload keys on last); True when any did."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = False
    for key in order:
        path = directory / key
        if path.exists() and path.read_bytes() == files[key]:
            continue
        temporary = directory / f".{key}.new"
        temporary.write_bytes(files[key])
        os.chmod(temporary, 0o600)
        temporary.replace(path)
        changed = True
    return changed


class Keeper:
    """What keeps a Secret's material after start: `ensure` again every CHECK_EVERY seconds (another replica may
    have renewed it), every RETRY seconds while it fails; a failure is logged, and the listeners keep what they
    have."""

    WHAT: ClassVar[str]
    failing: bool

    async def ensure(self) -> object:
        raise NotImplementedError

    async def start(self) -> None:
        """The first `ensure`, before the listeners load what it writes."""
        raise NotImplementedError

    async def keep(self) -> None:
        while True:
            await asyncio.sleep(RETRY if self.failing else CHECK_EVERY)
            try:
                await self.ensure()
                self.failing = False
            except Exception as exc:  # a transient API error must not end the loop that keeps the material
                self.failing = True
                log.warning("could not check %s: %s", self.WHAT, exc)
