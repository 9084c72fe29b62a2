"""Fixtures of the end-to-end tests: one one-node cluster per session (tests/e2e/cluster.py), the kflare image
imported into it, and the Cloudflare emulator on the bridge's host address, where pods reach it.

The session's `control_plane` is the cluster, so the shared `kube` and `namespace` fixtures work against it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NoReturn

import pytest

from app.controlplane import ControlPlane, bin_dir_from_env
from app.dev import dev_state
from tests.e2e.cluster import GATEWAY, Cluster, gateway_bin_dir_from_env, node_bin_dir_from_env
from tests.e2e.gateway import GatewayRelease, install
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.gateway import gateway_api  # noqa: F401 (a fixture of these tests)
from tests.image.conftest import image, podman  # noqa: F401 (image is a fixture of these tests)


def _missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(message)  # e2e tests that skip on CI would let a broken harness look green
    pytest.skip(message)


@pytest.fixture(scope="session")
def cluster(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # noqa: F811
    bins, node = bin_dir_from_env(), node_bin_dir_from_env()
    if bins is None or node is None:
        _missing("no cluster binaries: set K8S_TEST_BIN and K8S_NODE_BIN (`make e2e` does)")
    os.environ["NO_PROXY"] = f"127.0.0.1,localhost,{GATEWAY}"  # aiohttp and httpx trust proxy variables
    archive = tmp_path_factory.mktemp("images") / "kflare.tar"
    podman("save", "--quiet", "--format=docker-archive", f"--output={archive}", image, timeout=300)
    # The Gateway tests' pieces (hack/gateway-e2e.sh): the node's DNS and the data plane's and the conformance
    # suite's images, imported with the kflare image.
    gateway = gateway_bin_dir_from_env()
    extra = sorted(gateway.glob("*.tar")) if gateway else []
    coredns = gateway / "coredns" if gateway else None
    plane = Cluster.in_tempdir(bins, node_bin_dir=node, images=[archive, *extra], coredns=coredns)
    try:
        plane.start()
    except Exception:
        print(*(f"--- {name}\n{tail}" for name, tail in plane.logs()), sep="\n")
        raise
    figures = ", ".join(f"{k} {v:.1f}s" for k, v in plane.timings.items())
    print(f"\ncluster up: {figures}")
    try:
        yield plane
    finally:
        plane.stop()
        steps = plane.timings.items()
        stops = ", ".join(f"{k.removeprefix('stop ')} {v:.1f}s" for k, v in steps if k.startswith("stop "))
        print(f"\ncluster down in {plane.timings['teardown']:.1f}s: {stops}")
        assert not plane.leaked, f"cluster left behind: {plane.leaked}"


@pytest.fixture(scope="session")
def control_plane(cluster: Cluster) -> ControlPlane:
    return cluster


@pytest.fixture(scope="session")
def node_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """The emulator with the examples' account and token, on the bridge's host address: pods reach it there."""
    process = EmulatorProcess(dev_state(), host=GATEWAY, workdir=tmp_path_factory.mktemp("emulator"))
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def gateway_bins() -> Path:
    found = gateway_bin_dir_from_env()
    if found is None:
        _missing("no Gateway test binaries: set K8S_GATEWAY_BIN (`make e2e` does)")
    return found


# Per module: the release's cluster-scoped objects (the metrics reader's ClusterRole...) are its own, so another
# module's release can be installed only once this one is gone.
@pytest.fixture(scope="module")
def gateway_release(
    cluster: Cluster,
    image: str,  # noqa: F811
    node_emulator: EmulatorProcess,
    gateway_bins: Path,
    gateway_api: Path,  # noqa: F811 (the fixture)
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayRelease]:
    """The chart with the Gateway class on and the data plane's defaults, for the Gateway and conformance tests."""
    yield from install(cluster, image, node_emulator, gateway_bins, tmp_path_factory.mktemp("gateway"))


LAST: Final = ("test_gateway.py", "test_upgrade.py")
"""Modules that run after every other, in this order: the Gateway module ends by taking every kflare resource down
(the guide's uninstall sequence), and the upgrade module starts from an empty Cloudflare."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: LAST.index(item.path.name) + 1 if item.path.name in LAST else 0)
