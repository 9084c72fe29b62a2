"""Fixtures of the emulator conformance tests: the official SDK against a running emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cloudflare
import pytest

from tests import conftest as root_conftest
from tests.fixtures.emulator import EmulatorProcess

# Until the root conftest loads tests.fixtures.emulator as a plugin, bring its fixtures in here; once it does, a second
# registration would start a second emulator for this directory.
if "tests.fixtures.emulator" not in getattr(root_conftest, "pytest_plugins", []):
    from tests.fixtures.emulator import emulator, fresh_emulator  # noqa: F401


@pytest.fixture
def cf(fresh_emulator: EmulatorProcess) -> Iterator[cloudflare.Cloudflare]:
    """The SDK with the all-powerful token, on a freshly reset emulator, without retries."""
    with fresh_emulator.client() as client:
        yield client


@pytest.fixture
def zone(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> Any:
    """An active Free zone ``example.com`` in the starting account."""
    created = cf.zones.create(name="example.com", account={"id": fresh_emulator.account_id})
    fresh_emulator.activate_zone(created.id)
    return cf.zones.get(zone_id=created.id)
