from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import respx

from app.cloudflare import BudgetConfig, CloudflareClient, CloudflareSession, HttpConfig, Timeouts
from tests.unit.cloudflare.helpers import BASE, TLS, TOKEN, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def session(clock: FakeClock) -> AsyncIterator[CloudflareSession]:
    config = HttpConfig(base_url=BASE, timeouts=Timeouts(request=5.0), verify=TLS)
    async with CloudflareSession(config, BudgetConfig(), clock=clock) as session:
        yield session


@pytest.fixture
def client(session: CloudflareSession, api: respx.MockRouter) -> CloudflareClient:
    return session.client(TOKEN)
