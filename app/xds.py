"""The fourth listener: Envoy's configuration over REST-JSON xDS (`POST /v3/discovery:<type>`), authenticated.

REST polling was chosen over gRPC ADS because it needs no protobuf or gRPC library (none is a dependency), the
bodies are the JSON forms of the xDS messages, and Envoy keeps its last configuration through any error. Routes are
in RDS and endpoints in EDS, so a route change replaces one RouteConfiguration and no listener drains.

Envoy presents its token in the node metadata of each request (REST xDS cannot add headers). A standby, or a leader
that has not computed a snapshot yet, answers 503: Envoy keeps what it has and asks again. The token's file (a
mounted Secret) is read again when it changes, so a rotated token is asked for without a restart.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response

from reconcilers.gateway import envoy
from reconcilers.gateway.snapshot import SnapshotStore

log = logging.getLogger(__name__)
MAX_BODY = 1 << 20


class TokenFile:
    """The token Envoy must present, as its file holds it now (`value`); `watch()` follows the file."""

    def __init__(self, path: Path, *, interval: float = 3.0) -> None:
        self.path, self.interval = path, interval
        self.value = self._read()

    def _read(self) -> str:
        token = self.path.read_text().strip()
        if not token:
            raise ValueError(f"{self.path} holds no token")
        return token

    def reload(self) -> bool:
        """Read the file again; True when it holds a new token. One that cannot be read, or an empty file (a
        Secret half updated), keeps the current token."""
        try:
            token = self._read()
        except (OSError, ValueError) as exc:
            log.warning("cannot read the xDS token, keeping the current one: %s", exc)
            return False
        if token == self.value:
            return False
        self.value = token
        log.info("reloaded the xDS token from %s", self.path)
        return True

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.reload()


def xds_app(store: SnapshotStore, token: Callable[[], str]) -> FastAPI:
    """The listener's app; `token()` is the token a request must present (asked for each request)."""
    app = FastAPI(title="kflare xDS", version="v3", docs_url=None, redoc_url=None, openapi_url=None)
    answered: dict[tuple[str, str, tuple[str, ...]], str] = {}
    refused: set[str] = set()

    @app.post("/v3/discovery:{type_key}", summary="REST-JSON xDS discovery")
    async def discovery(type_key: str, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY:
            return Response(status_code=413)
        try:
            req: dict[str, Any] = json.loads(body or b"{}")
        except ValueError:
            return Response("not JSON", status_code=400, media_type="text/plain")
        presented = str((((req.get("node") or {}).get("metadata")) or {}).get(envoy.TOKEN_METADATA) or "")
        expected = token()
        if not expected or not hmac.compare_digest(presented.encode(), expected.encode()):
            return Response("unauthenticated", status_code=401, media_type="text/plain")
        if type_key not in envoy.TYPES:
            return Response(status_code=404)
        node = str((req.get("node") or {}).get("id") or "")
        names = [str(n) for n in req.get("resource_names") or []]
        poll = (node, type_key, tuple(sorted(names)))
        had = str(req.get("version_info") or "")
        sent = answered.get(poll)
        if req.get("error_detail") or (had and sent is not None and had != sent and sent not in refused):
            # Envoy refused what it was sent last (REST polling reports it only by asking again with the version it
            # kept) and keeps its previous configuration. An empty version is a new subscription (a cluster
            # replaced, Envoy restarted), not a refusal; node IDs must be unique per Envoy for this to hold.
            message = str((req.get("error_detail") or {}).get("message") or f"version {sent} not taken")
            if sent is not None:
                refused.add(sent)
            store.refused(type_key, message, node, sent or "")
            log.warning(
                "data plane refused its configuration", extra={"node": node, "type": type_key, "error": message}
            )
        answer = store.answer(type_key, names)
        if answer is None:
            return Response("no configuration to serve here", status_code=503, media_type="text/plain")
        answered[poll] = answer.version
        if had and had == answer.version and not req.get("error_detail"):
            store.accepted(type_key, node, had)
        if req.get("version_info") == answer.version and not req.get("error_detail"):
            return Response(status_code=304)
        reply = {"version_info": answer.version, "resources": answer.resources, "type_url": answer.type_url}
        return Response(json.dumps(reply, separators=(",", ":")), media_type="application/json")

    return app
