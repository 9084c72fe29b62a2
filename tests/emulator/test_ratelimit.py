"""The global rate limit: headers on every reply, 429 with Retry-After past the limit, then a lockout."""

from __future__ import annotations

import re

import cloudflare
import httpx
import pytest

from tests.fixtures.emulator import EmulatorProcess

RATELIMIT = re.compile(r'"default";r=(\d+);t=(\d+)')


def test_headers_on_every_reply(fresh_emulator: EmulatorProcess) -> None:
    cf = fresh_emulator.client()
    first = cf.user.tokens.with_raw_response.verify().http_response
    second = cf.user.tokens.with_raw_response.verify().http_response
    assert first.headers["ratelimit-policy"] == '"default";q=1200;w=300'
    remaining = [int(RATELIMIT.fullmatch(r.headers["ratelimit"]).group(1)) for r in (first, second)]
    assert remaining == [1199, 1198]
    with pytest.raises(cloudflare.NotFoundError) as error_reply:
        cf.zones.get(zone_id="a" * 32)
    assert RATELIMIT.fullmatch(error_reply.value.response.headers["ratelimit"])


def test_429_then_lockout(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.set_rate_limit(calls=3, seconds=60, lockout=120)
    # An account-owned token has a budget of its own; the starting token (a user's) is not drawn on.
    own = fresh_emulator.add_token(["*"], owner="account", account_id=fresh_emulator.account_id)
    cf = fresh_emulator.client(own["value"])
    for _ in range(3):
        cf.accounts.tokens.verify(account_id=fresh_emulator.account_id)

    with pytest.raises(cloudflare.RateLimitError) as limited:
        cf.accounts.get(account_id=fresh_emulator.account_id)
    assert limited.value.status_code == 429
    assert [(e.code, e.message) for e in limited.value.errors] == [
        (971, "Please wait and consider throttling your request speed")
    ]
    assert 119 <= int(limited.value.response.headers["retry-after"]) <= 120
    assert limited.value.response.headers["ratelimit"].startswith('"default";r=0;')

    # Locked out: every call of that budget is refused, whatever it is.
    with pytest.raises(cloudflare.RateLimitError):
        cf.zones.list()
    assert fresh_emulator.client().zones.list().result == []  # other budgets are unaffected

    statuses = [c["status"] for c in fresh_emulator.calls(token_id=own["id"])]
    assert statuses == [200, 200, 200, 429, 429]
    budgets = fresh_emulator.rate_limit_state()["budgets"]
    assert budgets[f"token:{own['id']}"]["locked_for"] > 100

    fresh_emulator.set_rate_limit(calls=3, seconds=60, lockout=120)  # resets budgets and ends lockouts
    assert cf.accounts.get(account_id=fresh_emulator.account_id) is not None


def test_user_tokens_of_one_user_share_a_budget(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.set_rate_limit(calls=2, seconds=60, lockout=60)
    first = fresh_emulator.client(fresh_emulator.add_token(["*"], user="alice")["value"])
    second = fresh_emulator.client(fresh_emulator.add_token(["*"], user="alice")["value"])
    first.user.tokens.verify()
    second.user.tokens.verify()
    with pytest.raises(cloudflare.RateLimitError):
        first.user.tokens.verify()


def test_sdk_backs_off_on_retry_after(fresh_emulator: EmulatorProcess) -> None:
    # The SDK honours Retry-After up to 60 s; with a one-second lockout its retry succeeds.
    fresh_emulator.set_rate_limit(calls=1, seconds=60, lockout=1)
    own = fresh_emulator.add_token(["*"], owner="account", account_id=fresh_emulator.account_id)
    cf = fresh_emulator.client(own["value"], max_retries=2)
    cf.accounts.tokens.verify(account_id=fresh_emulator.account_id)
    assert cf.accounts.tokens.verify(account_id=fresh_emulator.account_id) is not None
    assert [c["status"] for c in fresh_emulator.calls(token_id=own["id"])] == [200, 429, 200]


def test_calls_without_a_known_token_are_not_limited(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.set_rate_limit(calls=1, seconds=60, lockout=60)
    with httpx.Client(base_url=fresh_emulator.base_url) as http:
        answers = [http.get("/zones", headers={"Authorization": "Bearer unknown"}).status_code for _ in range(3)]
    assert answers == [403, 403, 403]
