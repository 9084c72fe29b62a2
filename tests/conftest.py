"""Fixtures every test may use; each family lives in tests/fixtures/."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.memory import skip_last_collection

skip_last_collection()  # a session that is over has no garbage worth collecting

pytest_plugins = [
    "tests.fixtures.kube",
    "tests.fixtures.emulator",
    "tests.fixtures.controller",
    "tests.fixtures.envoy",
    "tests.fixtures.gateway",
]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules marked heavy (seconds each, of work or of real-time waits) first, in the order given so far
    (shuffled by pytest-randomly): the workers, which take modules in this order, then end together rather than one
    starting a long module when the other is nearly done."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running: a leaked task is a leaked watch, timer or connection."""
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    for _ in range(5):  # let tasks that are already finishing run their last step
        leaked = {t for t in asyncio.all_tasks() - before if t is not current and not t.done()}
        if not leaked:
            return
        await asyncio.sleep(0)
    for task in leaked:
        task.cancel()
    pytest.fail(f"test leaked {len(leaked)} asyncio task(s): {sorted(t.get_name() for t in leaked)}")
