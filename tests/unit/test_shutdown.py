"""A stopping process stops reconciling before it closes its listeners: a reconcile's write passes the process's own
webhook (in `kflare dev`, or a cluster with one replica), and one sent after the listener closed fails as
"connection refused", an ERROR line in the log of every clean stop."""

from __future__ import annotations

import pytest

from app.server import Process
from app.settings import Settings


async def test_reconciles_stop_before_any_listener_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    process = Process(
        Settings(
            health_probe_bind_address="127.0.0.1:0",
            metrics_bind_address="127.0.0.1:0",
            metrics_secure=False,
            webhook_bind_address="127.0.0.1:0",
        )
    )
    assert {served.name for served in process.listeners} == {"probes", "metrics", "webhook"}
    closing_when_reconciles_stopped: list[bool] = []

    async def stop_reconciling() -> None:
        closing_when_reconciles_stopped.extend(served.server.should_exit for served in process.listeners)

    monkeypatch.setattr(process.runtime, "stop_reconciling", stop_reconciling)
    await process.stop()
    assert closing_when_reconciles_stopped == [False, False, False]
    assert all(served.server.should_exit for served in process.listeners)
