"""Fixtures of the chart tests: helm, with its own home, once as Helm 3 and once as Helm 4."""

from __future__ import annotations

import pytest

from tests.chart.helm import HELMS, Helm, helm_binary
from tests.chart.registry import registry  # noqa: F401 (a fixture of the package tests)
from tests.chart.test_install import release  # noqa: F401 (a fixture of the package tests)
from tests.image.conftest import image  # noqa: F401 (a fixture of the package tests)


@pytest.fixture(scope="session", params=HELMS)
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm_binary(request.param), tmp_path_factory.mktemp(f"{request.param}-home"))
