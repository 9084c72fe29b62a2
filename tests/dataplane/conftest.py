"""Every data-plane test also checks that Envoy refused none of the configuration it was sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.envoy import DataPlane


@pytest.fixture(autouse=True)
def _envoy_refused_nothing(dataplane: DataPlane) -> Iterator[None]:
    dataplane.store.refusals.clear()
    yield
    assert not dataplane.store.refusals, f"Envoy refused configuration: {dataplane.store.refusals}"
