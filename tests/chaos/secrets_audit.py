"""The chaos session's API server keeps an audit log (tests/chaos/conftest.py starts it so): scenario 1 counts
the controller's Kubernetes writes in it, scenario 5 searches every status and Event written in the session.

Secrets are logged without bodies (their values must not land in the log that is searched for them); kflare's
objects and Events with request and response, so every status any controller wrote is in it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete"]
    resources: [{group: "", resources: ["secrets", "configmaps"]}]
  - level: RequestResponse
    verbs: ["create", "update", "patch", "delete"]
    resources: [{group: "kflare.dev"}, {group: "", resources: ["events"]}, {group: "events.k8s.io"}]
  - level: None
"""

WRITES = frozenset({"create", "update", "patch", "delete"})


def audit_args(workdir: Path) -> list[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    policy = workdir / "audit-policy.yaml"
    policy.write_text(POLICY)
    # The log backend writes each event before the request returns ("blocking" is its default mode).
    return [f"--audit-policy-file={policy}", f"--audit-log-path={workdir / 'audit.log'}", "--audit-log-maxsize=0"]


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, since: int = 0) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open("rb") as log:
            log.seek(since)
            for line in log:
                if not line.endswith(b"\n"):
                    break  # being written
                yield json.loads(line)

    def lines(self) -> Iterator[str]:
        if self.path.exists():
            with self.path.open(errors="replace") as log:
                yield from log

    def writes_by(self, user: str, since: int) -> int:
        """Writes `user` made to kflare's objects, Secrets and ConfigMaps since `since` (Events do not count:
        they change nothing a reconcile reads)."""
        return sum(
            1
            for event in self.events(since)
            if event.get("user", {}).get("username") == user
            and event.get("verb") in WRITES
            and event.get("objectRef", {}).get("resource") != "events"
        )
