"""The one-node cluster itself: the node Ready, and a pod of the kflare image scheduled, run by containerd under the
restricted Pod Security profile, its log read back through the kubelet, reaching the API server as the
`kubernetes` Service from its network namespace."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from app import __version__
from tests.e2e.cluster import NODE, POD_CIDR, Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RESTRICTED = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def pod(name: str, image: str, command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "securityContext": RESTRICTED,
                }
            ],
        },
    }


def run_pod(cluster: Cluster, manifest: dict[str, Any], timeout: float = 120) -> tuple[dict[str, Any], str]:
    name = manifest["metadata"]["name"]
    cluster.kubectl("create", "-f", "-", input_text=yaml.safe_dump(manifest))
    end = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < end:
        status = json.loads(cluster.kubectl("get", "pod", name, "-n", "default", "-o", "json").stdout)
        if status["status"].get("phase") in ("Succeeded", "Failed"):
            break
        time.sleep(0.5)
    log = cluster.kubectl("logs", name, "-n", "default", check=False).stdout
    cluster.kubectl("delete", "pod", name, "-n", "default", "--wait=false")
    return status, log


def test_the_node_is_ready(cluster: Cluster) -> None:
    node = json.loads(cluster.kubectl("get", "node", NODE, "-o", "json").stdout)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.34.12"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")


def test_a_pod_runs_the_image_and_reaches_the_api_server(cluster: Cluster, image: str) -> None:
    # The pod's ServiceAccount token, projected by the kubelet, authenticates it to the `kubernetes` Service.
    script = (
        "import os, ssl, urllib.request\n"
        "from app import __version__\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount'\n"
        "ctx = ssl.create_default_context(cafile=f'{sa}/ca.crt')\n"
        "host = os.environ['KUBERNETES_SERVICE_HOST']\n"
        "auth = {'Authorization': 'Bearer ' + open(f'{sa}/token').read()}\n"
        "req = urllib.request.Request(f'https://{host}/version', headers=auth)\n"
        "body = urllib.request.urlopen(req, timeout=10, context=ctx).read().decode()\n"
        "print(__version__, host, body.count('v1.34.12'))\n"
    )
    status, log = run_pod(cluster, pod("probe", image, ["python", "-c", script]))
    assert status["status"]["phase"] == "Succeeded", (status["status"], log)
    version, host, seen = log.split()
    assert version == __version__
    assert host == "10.96.0.1"
    assert seen == "1"
    assert status["status"]["podIP"].startswith(POD_CIDR.rsplit(".", 2)[0])
