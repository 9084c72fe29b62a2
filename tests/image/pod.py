"""A pod of the chart's Deployment, run by podman as the kubelet would run it: its container's command, arguments,
environment, security context, resource limits and volumes (emptyDirs as tmpfs, Secrets as read-only files), and
the ServiceAccount token mounted where every pod has it, with the API server as the `kubernetes` Service.

The network is the host's (nothing routes a cluster's Service addresses here), so the listeners are moved to free
loopback ports; the Cloudflare API is the emulator's. Nothing else differs from what the chart renders.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.controlplane import ControlPlane, free_port
from tests.fixtures.controller import ControllerProcess
from tests.fixtures.emulator import EmulatorProcess
from tests.image.conftest import podman, podman_env, ulimits

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass
class Mounts:
    """What the kubelet would put in the pod: the ServiceAccount's token and each Secret volume's files."""

    token: str
    secrets: Mapping[str, Mapping[str, bytes]]  # Secret name -> key -> value


def _memory(quantity: str) -> str:
    units = {"Ki": "k", "Mi": "m", "Gi": "g"}
    number, unit = re.fullmatch(r"(\d+)([KMG]i)?", quantity).groups()  # type: ignore[union-attr]
    return f"{number}{units[unit] if unit else 'b'}"


def _cpus(quantity: str) -> str:
    return str(int(quantity[:-1]) / 1000) if quantity.endswith("m") else quantity


def _listener(arg: str, ports: dict[str, int]) -> str:
    """Move `--x-bind-address=:8081` and `--webhook-port=9443` to free loopback ports; remember which."""
    flag, _, value = arg.partition("=")
    if flag in ("--health-probe-bind-address", "--metrics-bind-address") and value not in ("0", ""):
        ports[flag] = free_port()
        return f"{flag}=127.0.0.1:{ports[flag]}"
    if flag == "--webhook-port" and value != "0":
        ports[flag] = free_port()
        return f"{flag}={ports[flag]}"
    return arg


class PodProcess(ControllerProcess):
    """The chart's manager container, under podman: the image the pod names, which podman must hold."""

    def __init__(
        self,
        pod: Mapping[str, Any],
        mounts: Mounts,
        plane: ControlPlane,
        emulator: EmulatorProcess,
        workdir: Path,
        *,
        pod_name: str,
        namespace: str,
    ) -> None:
        super().__init__(plane, emulator, workdir)
        self.name = f"kflare-test-{uuid.uuid4().hex[:8]}"
        (container,) = pod["containers"]
        pod_security = pod.get("securityContext", {})
        security = {**pod_security, **container.get("securityContext", {})}
        flags = [f"--name={self.name}", "--network=host", *ulimits()]

        flags.append(f"--user={security['runAsUser']}:{security.get('runAsGroup', security['runAsUser'])}")
        if "fsGroup" in pod_security:
            flags.append(f"--group-add={pod_security['fsGroup']}")
        if security.get("readOnlyRootFilesystem"):
            flags.append("--read-only")
        flags += [f"--cap-drop={c}" for c in security.get("capabilities", {}).get("drop", [])]
        flags += [f"--cap-add={c}" for c in security.get("capabilities", {}).get("add", [])]
        if security.get("allowPrivilegeEscalation") is False:
            flags.append("--security-opt=no-new-privileges")
        assert security.get("seccompProfile", {}).get("type") == "RuntimeDefault"  # podman's default profile
        limits = container.get("resources", {}).get("limits", {})
        if "memory" in limits:
            flags.append(f"--memory={_memory(limits['memory'])}")
        if "cpu" in limits:
            flags.append(f"--cpus={_cpus(limits['cpu'])}")

        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if "emptyDir" in volume:
                flags.append(f"--tmpfs={mount['mountPath']}:rw,nosuid,nodev,mode=1777")
            elif "secret" in volume:
                files = workdir / f"secret-{mount['name']}"
                files.mkdir()
                for key, value in mounts.secrets[volume["secret"]["secretName"]].items():
                    (files / key).write_bytes(value)
                    (files / key).chmod(0o644)  # a Secret volume's defaultMode
                flags.append(f"--volume={files}:{mount['mountPath']}:ro")
            else:
                raise AssertionError(f"no stand-in for volume {volume}")

        # The ServiceAccount token, its CA and namespace, where the kubelet mounts them; the API server as the
        # kubernetes Service's address.
        assert pod.get("automountServiceAccountToken", True)
        account = workdir / "serviceaccount"
        account.mkdir()
        (account / "token").write_text(mounts.token)
        (account / "ca.crt").write_bytes(plane.ca.pem)
        (account / "namespace").write_text(namespace)
        for path in account.iterdir():
            path.chmod(0o644)
        flags.append(f"--volume={account}:{SERVICE_ACCOUNT}:ro")
        server = urlsplit(plane.host)
        env = {"KUBERNETES_SERVICE_HOST": str(server.hostname), "KUBERNETES_SERVICE_PORT": str(server.port)}
        for var in container.get("env", []):
            field = var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            value = {"metadata.name": pod_name, "metadata.namespace": namespace}.get(field, var.get("value"))
            assert value is not None, f"no stand-in for {var}"
            env[var["name"]] = value
        flags += [f"--env={k}={v}" for k, v in env.items()]

        command = container.get("command")
        if command:
            flags.append(f"--entrypoint={json.dumps(command)}")
        self.ports: dict[str, int] = {}
        args = [_listener(a, self.ports) for a in container.get("args", [])]
        self.probe_port = self.ports["--health-probe-bind-address"]
        self.image = container["image"]
        self.argv = ["podman", "run", "--rm", *flags, self.image, *args, f"--cloudflare-api-url={emulator.base_url}"]

    def start(self) -> PodProcess:
        self._log = self.log_path.open("ab")
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=podman_env())
        return self

    def stop(self) -> None:
        super().stop()
        podman("rm", "--force", "--ignore", self.name, check=False)
