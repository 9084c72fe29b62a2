"""`CloudflareSession`: what the process holds once for Cloudflare, the shared HTTP client and every token's budget.

The server's lifespan creates one session and closes it on shutdown; every controller gets its clients from it:

    async with CloudflareSession(HttpConfig(), BudgetConfig(share=0.8)) as session:
        client = session.client(token)          # cheap; the budget is per token, shared by all its clients
        zone = await client.get_zone(zone_id)
        stats = session.budget_stats()          # for the metrics exporter
"""

from __future__ import annotations

import httpx

from app.clock import Clock
from app.cloudflare.budget import BudgetConfig, BudgetRegistry, BudgetStats
from app.cloudflare.client import CloudflareClient
from app.cloudflare.http import CloudflareHTTP, HttpConfig
from app.cloudflare.secret import Secret


class CloudflareSession:
    """The process's shared HTTP client and budget registry. `transport` and `clock` are for tests."""

    def __init__(
        self,
        http: HttpConfig | None = None,
        budget: BudgetConfig | None = None,
        *,
        clock: Clock | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.http = CloudflareHTTP(http, transport=transport)
        self.budgets = BudgetRegistry(budget, clock)

    def __repr__(self) -> str:
        return f"CloudflareSession(base_url={self.http.config.base_url!r}, tokens={len(self.budgets.stats())})"

    def client(
        self, token: str | Secret, *, budget_key: str | None = None, budget: BudgetConfig | None = None
    ) -> CloudflareClient:
        """A client for `token`. Clients of one token share its budget. `budget_key` makes several tokens share
        one budget (Cloudflare counts a user's tokens together); `budget` overrides the session's budget settings
        for a token seen for the first time."""
        secret = Secret.of(token)
        key = f"key:{budget_key}" if budget_key is not None else secret.key
        name = budget_key if budget_key is not None else secret.fingerprint
        return CloudflareClient(self.http, self.budgets.get(key, name=name, config=budget), secret)

    def budget_stats(self) -> list[BudgetStats]:
        return self.budgets.stats()

    def start(self) -> None:
        self.http.start()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> CloudflareSession:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
