"""An upgrade from the previous release (chart and image 0.2.2, built from its commit as it was released) to this
tree's, on the one-node cluster: every resource stays Ready, keeps its Cloudflare object, and Cloudflare sees reads
only."""

from __future__ import annotations

import datetime as dt
import io
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from app.dev import dev_secret_manifest
from tests.chart.helm import Helm, helm_binary
from tests.chart.test_install import LEASE, Release
from tests.chart.test_package import package
from tests.e2e.cluster import Cluster
from tests.e2e.test_chart import NAMESPACE, Installed, deadline, overrides, webhook_probe
from tests.fixtures.emulator import EmulatorProcess
from tests.image.conftest import REPO, podman, podman_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

PREVIOUS = "36b22cf797670599290fe749b5f0186d3ab66940"
"""The commit chart and app 0.2.2 were released from."""
WRITES = ("POST", "PUT", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def previous(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The previous release's tree (its chart and examples) and its image, built by its own hack/image.sh and
    imported into the node."""
    tree = tmp_path_factory.mktemp("previous")
    archived = subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS], capture_output=True, check=False)
    assert archived.returncode == 0, (
        f"git archive {PREVIOUS} failed: the upgrade test needs the previous release's commit (a full clone, not a"
        f" shallow one):\n{archived.stderr.decode()[-2000:]}"
    )
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(tree, filter="data")
    built = subprocess.run(
        ["bash", str(tree / "hack" / "image.sh")],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
        env=podman_env(),
    )
    assert built.returncode == 0, f"the previous release's image did not build:\n{built.stderr[-4000:]}"
    image = built.stdout.strip().splitlines()[-1]
    archive = tree / "previous.tar"
    podman("save", "--quiet", "--format=docker-archive", f"--output={archive}", image, timeout=300)
    cluster.import_images(archive)
    return tree, image


def installed_kflare(cluster: Cluster) -> list[str]:
    done = cluster.kubectl("get", "kflare", "-A", "-o", "name", check=False)
    return [line for line in done.stdout.splitlines() if line.strip()]


def quiet(emulator: EmulatorProcess, since: float, *, reads: int, seconds: float = 300) -> list[dict[str, object]]:
    """The calls since `since`, once at least `reads` came and none for 10 s (the controller has looked at
    everything and has nothing left to do)."""
    calls: list[dict[str, object]] = []
    try:
        for _ in deadline(seconds, interval=1.0):
            calls = emulator.calls(since=since)
            last = max((float(str(c["time"])) for c in calls), default=since)
            if len(calls) >= reads and time.time() - last > 10:
                return calls
    except AssertionError as exc:
        tail = [f"{c['method']} {c['path']} {c.get('status')}" for c in calls[-15:]]
        raise AssertionError(f"{exc}: {len(calls)} calls (wanted {reads}, then 10 s of none); last: {tail}") from None
    raise AssertionError  # unreachable: deadline raises


def test_an_upgrade_from_the_previous_release_keeps_everything_ready_and_writes_nothing_to_cloudflare(
    cluster: Cluster,
    image: str,
    node_emulator: EmulatorProcess,
    previous: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree, old_image = previous
    # The modules before have taken every kflare resource down (the Gateway module's uninstall sequence) and left
    # what their policies kept in Cloudflare: the previous release starts from an empty account, as a new user's.
    assert not installed_kflare(cluster), "kflare resources are left from an earlier module"
    node_emulator.reset()
    helm = Helm(helm_binary(), tmp_path / "helm")
    release = Release(helm, cluster, "prev", NAMESPACE)
    installed = Installed(cluster, release, node_emulator, old_image, 0.0)
    for name in (NAMESPACE, "kflare-system"):
        installed.kubectl("create", "namespace", name, check=False)
    installed.kubectl("apply", "-f", "-", input_text=dev_secret_manifest())
    release.install(
        chart=tree / "chart" / "kflare",
        args=[*helm.values_args(overrides(old_image, node_emulator)), "--wait", "--timeout=5m"],
    )
    try:
        examples = "\n---\n".join(p.read_text() for p in sorted((tree / "examples").glob("*.yaml")))
        for _ in deadline(120):  # the webhook answers once its endpoints are in kube-proxy's rules
            if "error" not in installed.kubectl("apply", "-f", "-", input_text=examples, check=False).lower():
                break
        installed.wait_converged(300)
        began = time.time()
        quiet(node_emulator, began - 60, reads=1)
        # What the previous release holds once it has nothing left to do: Ready comes before its last looks (a list's
        # count of the rules using it is read again after the rule is made), which the comparison must not race.
        before = installed.wait_converged(300)
        began = time.time()
        old_pods = {p["metadata"]["name"] for p in installed.pods()}

        release.adopt_crds()  # kinds the previous release has none of, kept by this cluster's earlier releases
        with webhook_probe(installed) as answers:
            release.upgrade(
                chart=package(helm, tmp_path),
                args=[*helm.values_args(overrides(image, node_emulator)), "--wait", "--timeout=5m"],
            )
            for _ in deadline(240):
                pods = installed.ready_pods()
                if pods and not {p["metadata"]["name"] for p in pods} & old_pods and len(installed.pods()) == len(pods):
                    break
        assert all(c["image"] == image for p in installed.pods() for c in p["spec"]["containers"])
        # 0.2.2's pods stop answering at SIGTERM, so a write can be refused while each one leaves its endpoints
        # (docs/deploy.md, "Upgrading"); from this release on none is (test_chart's upgrade asserts it).
        refused = [a for a in answers if "denied the request" not in a]
        assert answers, "no probe ran during the upgrade"

        after = installed.wait_converged(300)
        assert {(o["kind"], o["metadata"]["name"]) for o in after} == {
            (o["kind"], o["metadata"]["name"]) for o in before
        }
        # A new pod leads, and has read what it manages (a drift-free reconcile of each resource is reads only,
        # fewer than the resources: a zone's records, an account's Workers and a zone's phases are read once each).
        new_pods = {p["metadata"]["name"] for p in installed.pods()}
        for _ in deadline(120):
            if installed.holder().split("_")[0] in new_pods:
                break
        lease = installed.get("lease", LEASE, "-n", NAMESPACE)["spec"]
        acquired = dt.datetime.fromisoformat(lease["acquireTime"]).timestamp()
        quiet(node_emulator, acquired - 1, reads=1)
        calls = node_emulator.calls(since=began)
        writes = [f"{c['method']} {c['path']}" for c in calls if c["method"] in WRITES]
        with capsys.disabled():
            print(
                f"\nupgrade from 0.2.2: {len(after)} resources Ready, {len(calls)} Cloudflare calls,"
                f" {len(writes)} writes; {len(refused)} of {len(answers)} webhook probes refused while 0.2.2's pods"
                " stopped"
            )
        assert not writes, writes
        for obj in after:  # and no resource was made again: its Cloudflare ID is the one it had
            was = next(
                o for o in before if o["kind"] == obj["kind"] and o["metadata"]["name"] == obj["metadata"]["name"]
            )
            assert (obj.get("status") or {}).get("cloudflareMetadata") == (was.get("status") or {}).get(
                "cloudflareMetadata"
            ), obj["metadata"]["name"]
    finally:
        installed.kubectl("delete", "kflare", "--all", "-A", "--wait", "--timeout=5m", check=False)
        release.uninstall("--wait")
