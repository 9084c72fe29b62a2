"""The xDS listener of every replica answers correctly: the leader with the configuration, a standby with
UNAVAILABLE (Envoy keeps what it has and tries again), and the new leader after a failover with the same
versions."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest

from app.controlplane import ControlPlane, free_port
from reconcilers.gateway import envoy
from tests.fixtures.controller import ControllerProcess
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.xds import Delta, channel
from tests.helpers import eventually

pytestmark = pytest.mark.integration


async def test_standby_refuses_the_stream_and_takes_over_with_the_same_configuration(
    control_plane: ControlPlane, emulator: EmulatorProcess, kflare_crds: None, gateway_api: Path, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(uuid.uuid4().hex)
    lease = f"gateway-{uuid.uuid4().hex[:6]}"
    replicas: list[tuple[ControllerProcess, int]] = []
    for _ in range(2):
        port = free_port()
        proc = ControllerProcess(
            control_plane,
            emulator,
            tmp_path,
            "--leader-elect=true",
            f"--lease-name={lease}",
            "--lease-duration=3s",
            "--renew-deadline=2s",
            "--retry-period=500ms",
            "--gateway-enabled=true",
            f"--gateway-xds-bind-address=127.0.0.1:{port}",
            f"--gateway-xds-token-file={token}",
        ).start()
        replicas.append((proc, port))
    try:
        for proc, _ in replicas:
            proc.wait_ready()

        async def routes(port: int) -> tuple[str, str | None]:
            """How the replica answers a routes subscription: ok and the version, or the error status."""
            async with channel(port) as ch:
                stream = Delta(ch, token.read_text())
                await stream.send("routes", [envoy.INGRESS])
                answer = await stream.outcome()
            if isinstance(answer, grpc.aio.AioRpcError):
                return answer.code().name, None
            return "OK", answer.system_version_info

        async def one_leader() -> list[tuple[str, str | None]] | None:
            found = [await routes(port) for _, port in replicas]
            return found if sorted(code for code, _ in found) == ["OK", "UNAVAILABLE"] else None

        found = await eventually(one_leader, what="the leader to serve xDS and the standby to refuse")
        leader = next(i for i, (code, _) in enumerate(found) if code == "OK")
        version = found[leader][1]
        replicas[leader][0].kill()
        survivor = replicas[1 - leader][1]

        async def taken_over() -> str | None:
            code, answered = await routes(survivor)
            return answered if code == "OK" else None

        assert await eventually(taken_over, what="the standby to take over", timeout=30) == version
    finally:
        for proc, _ in replicas:
            proc.stop()
