"""The admin API: faults of every kind, the call log, state seeding and dumping, reset."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import cloudflare
import httpx
import pytest

from tests.fixtures.emulator import EmulatorError, EmulatorProcess

ZONES = r"^GET /client/v4/zones$"


async def test_latency_fault_delays_the_matching_call_and_no_other(fresh_emulator: EmulatorProcess) -> None:
    fault_id = fresh_emulator.fault(ZONES, "latency", latency_ms=2000, count=1)
    headers = {"Authorization": f"Bearer {fresh_emulator.token}"}
    async with httpx.AsyncClient(base_url=fresh_emulator.base_url, headers=headers, timeout=10.0) as http:
        delayed = asyncio.ensure_future(http.get("/zones"))

        def arrived_unanswered() -> list[dict[str, Any]]:
            return [c for c in fresh_emulator.calls(path="/zones$") if c["status"] is None]

        await poll(arrived_unanswered, "the delayed call to arrive")
        # While the first call waits, the same route (the fault's count is spent) and another route answer.
        again = await http.get("/zones")
        verify = await http.get("/user/tokens/verify")
        assert (again.status_code, verify.status_code) == (200, 200)
        assert not delayed.done(), "the faulted call is still being delayed"
        first = await delayed
    assert first.status_code == 200
    assert first.json()["result"] == [], "after the delay the call is answered normally"
    assert [f["remaining"] for f in fresh_emulator.faults() if f["id"] == fault_id] == [0]
    logged = fresh_emulator.calls()
    assert [(c["path"], c["status"]) for c in logged] == [
        ("/client/v4/zones", 200),
        ("/client/v4/zones", 200),
        ("/client/v4/user/tokens/verify", 200),
    ]


async def poll(check: Callable[[], Any], what: str) -> Any:
    """Poll `check` (synchronous) until it returns something truthy; fail after a deadline."""
    deadline = time.monotonic() + 10.0
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)
    return result


def test_status_fault_json_and_html(fresh_emulator: EmulatorProcess) -> None:
    cf = fresh_emulator.client()
    fresh_emulator.fault(ZONES, "status", status=503, count=1)
    with pytest.raises(cloudflare.InternalServerError) as json_error:
        cf.zones.list()
    assert json_error.value.status_code == 503
    body: Any = json_error.value.body
    assert body["success"] is False
    assert body["result"] is None

    fresh_emulator.fault(ZONES, "status", status=502, html=True, count=1)
    with pytest.raises(cloudflare.InternalServerError) as html_error:
        cf.zones.list()
    assert html_error.value.status_code == 502
    assert "<title>502 Bad Gateway</title>" in html_error.value.response.text

    fresh_emulator.fault(ZONES, "status", status=429, retry_after=7, count=1)
    with pytest.raises(cloudflare.RateLimitError) as limited:
        cf.zones.list()
    assert limited.value.response.headers["retry-after"] == "7"
    assert [e.code for e in limited.value.errors] == [971]

    assert cf.zones.list().result == []


def test_sdk_retries_through_a_transient_5xx(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.fault(ZONES, "status", status=500, count=1, retry_after=0)
    cf = fresh_emulator.client(max_retries=2)
    assert cf.zones.list().result == []
    assert [c["status"] for c in fresh_emulator.calls(path="/zones$")] == [500, 200]


def test_drop_fault(fresh_emulator: EmulatorProcess) -> None:
    fault_id = fresh_emulator.fault(ZONES, "drop", count=1)
    cf = fresh_emulator.client()
    with pytest.raises(cloudflare.APIConnectionError) as dropped:
        cf.zones.list()
    assert not isinstance(dropped.value, cloudflare.APITimeoutError)
    assert cf.zones.list().result == []
    logged = fresh_emulator.calls(path="/zones$")
    assert [(c["status"], c["fault"], c["fault_kind"]) for c in logged] == [(None, fault_id, "drop"), (200, None, None)]


def test_hang_fault_times_the_client_out(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.fault(ZONES, "hang", count=1)
    cf = fresh_emulator.client(timeout=0.5)
    with pytest.raises(cloudflare.APITimeoutError):
        cf.zones.list()
    assert cf.zones.list().result == []


async def test_hang_does_not_block_other_calls(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.fault(ZONES, "hang")
    headers = {"Authorization": f"Bearer {fresh_emulator.token}"}
    async with httpx.AsyncClient(base_url=fresh_emulator.base_url, headers=headers) as http:
        hung = asyncio.ensure_future(http.get("/zones", timeout=5.0))
        await poll(lambda: fresh_emulator.calls(path="/zones$"), "the hanging call to arrive")
        verify = await http.get("/user/tokens/verify", timeout=5.0)
        assert verify.status_code == 200, "another call is answered while one hangs"
        assert not hung.done()
        assert [c["status"] for c in fresh_emulator.calls(path="/zones$")] == [None], "the hanging call has no answer"
        hung.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hung


def test_fault_matching_probability_and_management(fresh_emulator: EmulatorProcess) -> None:
    cf = fresh_emulator.client()
    never = fresh_emulator.fault(ZONES, "status", status=500, probability=0.0)
    other_route = fresh_emulator.fault(r"^POST ", "status", status=500)
    assert cf.zones.list().result == []
    listed = {f["id"]: f for f in fresh_emulator.faults()}
    assert listed[never]["fired"] == 0
    assert listed[other_route]["fired"] == 0
    with pytest.raises(cloudflare.InternalServerError):
        cf.accounts.create(name="x")
    fresh_emulator.delete_fault(other_route)
    assert [f["id"] for f in fresh_emulator.faults()] == [never]
    fresh_emulator.clear_faults()
    assert fresh_emulator.faults() == []
    with pytest.raises(EmulatorError):
        fresh_emulator.fault("(", "drop")
    with pytest.raises(EmulatorError):
        fresh_emulator.fault(ZONES, "status")  # a status fault needs a status


def test_call_log_filters(fresh_emulator: EmulatorProcess) -> None:
    cf = fresh_emulator.client()
    cf.user.tokens.verify()
    mark = time.time()
    zone = cf.zones.create(name="example.com", account={"id": fresh_emulator.account_id})
    cf.zones.get(zone_id=zone.id)
    with pytest.raises(cloudflare.NotFoundError):
        cf.zones.get(zone_id="a" * 32)

    every = fresh_emulator.calls()
    assert [(c["method"], c["status"]) for c in every] == [("GET", 200), ("POST", 200), ("GET", 200), ("GET", 404)]
    assert all(c["token_id"] == fresh_emulator.token_id for c in every)
    assert [c["method"] for c in fresh_emulator.calls(since=mark)] == ["POST", "GET", "GET"]
    assert len(fresh_emulator.calls(method="get", path=r"^/client/v4/zones/")) == 2
    assert fresh_emulator.calls(token_id="0" * 32) == []
    fresh_emulator.clear_calls()
    assert fresh_emulator.calls() == []


def test_state_dump_seed_and_reset(fresh_emulator: EmulatorProcess) -> None:
    cf = fresh_emulator.client()
    zone = cf.zones.create(name="example.com", account={"id": fresh_emulator.account_id})
    cf.dns.records.create(zone_id=zone.id, type="MX", name="@", content="mx.example.com", priority=5, ttl=1)
    dump = fresh_emulator.state_dump()
    assert [z["name"] for z in dump["zones"]] == ["example.com"]
    assert [(r["type"], r["zone_id"]) for r in dump["dns_records"]] == [("MX", zone.id)]
    assert [t["id"] for t in dump["tokens"]] == [fresh_emulator.token_id]

    fresh_emulator.reset()
    assert cf.zones.list().result == []
    fresh_emulator.seed(dump)  # a dump seeds back to the same objects
    assert fresh_emulator.state_dump() == dump

    with pytest.raises(EmulatorError, match="dns_records"):
        fresh_emulator.seed({"dns_records": [{"zone_id": zone.id, "type": "A", "name": "x", "content": "bad"}]})
    with pytest.raises(EmulatorError, match="unknown resource"):
        fresh_emulator.add_token(["zones:read"])
    with pytest.raises(EmulatorError, match="unknown section"):
        fresh_emulator.seed({"kv_namespace": [{"title": "typo in the section's name"}]})
    assert fresh_emulator.state_dump() == dump  # a refused seed changes nothing


def test_admin_routes_are_not_logged_or_limited(fresh_emulator: EmulatorProcess) -> None:
    fresh_emulator.set_rate_limit(calls=1, seconds=60, lockout=60)
    for _ in range(3):
        fresh_emulator.faults()
    assert fresh_emulator.calls() == []


def test_options_are_known_whole_numbers_and_reset_restores_them(fresh_emulator: EmulatorProcess) -> None:
    defaults = fresh_emulator.set_options()
    assert defaults["lists_per_account"] == 1
    assert fresh_emulator.set_options(lists_per_account=5)["lists_per_account"] == 5
    with pytest.raises(EmulatorError, match="unknown options"):
        fresh_emulator.set_options(no_such_option=1)
    with pytest.raises(EmulatorError, match="whole number"):
        fresh_emulator.set_options(lists_per_account=-1)
    fresh_emulator.reset()
    assert fresh_emulator.set_options() == defaults


def test_call_log_names_each_client(fresh_emulator: EmulatorProcess) -> None:
    """Two clients of one token (two replicas of a controller) are told apart by their User-Agent."""
    for agent in ("kflare/1 (replica-a)", "kflare/1 (replica-b)"):
        headers = {"Authorization": f"Bearer {fresh_emulator.token}", "User-Agent": agent}
        assert httpx.get(f"{fresh_emulator.base_url}/zones", headers=headers, timeout=10).status_code == 200
    assert [c["user_agent"] for c in fresh_emulator.calls()] == ["kflare/1 (replica-a)", "kflare/1 (replica-b)"]


def test_counts_are_the_objects_each_kind_holds(fresh_emulator: EmulatorProcess) -> None:
    before = fresh_emulator.counts()
    seeded = fresh_emulator.seed(
        {
            "zones": [
                {
                    "name": "counted.example",
                    "account_id": fresh_emulator.account_id,
                    "dns_records": [
                        {"type": "A", "name": "a", "content": "192.0.2.1"},
                        {"type": "A", "name": "b", "content": "192.0.2.2"},
                    ],
                }
            ]
        }
    )
    assert seeded
    after = fresh_emulator.counts()
    assert after["zones"] == before["zones"] + 1
    assert after["dns_records"] == before["dns_records"] + 2
