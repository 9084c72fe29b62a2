"""The xDS listener of every replica answers correctly: the leader with the configuration, a standby with 503
(Envoy keeps what it has and asks again), and the new leader after a failover with the same versions."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from app.controlplane import ControlPlane, free_port
from reconcilers.gateway import envoy
from tests.fixtures.controller import ControllerProcess
from tests.fixtures.emulator import EmulatorProcess
from tests.helpers import eventually

pytestmark = pytest.mark.integration


async def test_standby_answers_503_and_takes_over_with_the_same_configuration(
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
    body = {"node": {"id": "t", "metadata": {envoy.TOKEN_METADATA: token.read_text()}}}
    try:
        for proc, _ in replicas:
            proc.wait_ready()

        async with httpx.AsyncClient(timeout=5) as http:

            async def answers() -> list[tuple[int, str | None]]:
                out = []
                for _, port in replicas:
                    reply = await http.post(f"http://127.0.0.1:{port}/v3/discovery:routes", json=body)
                    out.append((reply.status_code, reply.json()["version_info"] if reply.status_code == 200 else None))
                return out

            async def one_leader() -> list[tuple[int, str | None]] | None:
                found = await answers()
                return found if sorted(code for code, _ in found) == [200, 503] else None

            found = await eventually(one_leader, what="the leader to serve xDS and the standby to refuse")
            leader = next(i for i, (code, _) in enumerate(found) if code == 200)
            version = found[leader][1]
            replicas[leader][0].kill()
            survivor = replicas[1 - leader][1]

            async def taken_over() -> str | None:
                reply = await http.post(f"http://127.0.0.1:{survivor}/v3/discovery:routes", json=body)
                return str(reply.json()["version_info"]) if reply.status_code == 200 else None

            assert await eventually(taken_over, what="the standby to take over", timeout=30) == version
    finally:
        for proc, _ in replicas:
            proc.stop()
