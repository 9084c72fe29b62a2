"""``create_app`` used in process, behind httpx's ASGI transport, as unit tests of a client may use it."""

from __future__ import annotations

import httpx
import pytest

from app.emulator.app import create_app
from app.emulator.seed import SeedError

TOKEN = "in-process-token"
STATE = {
    "accounts": [{"id": "1" * 32, "name": "in process"}],
    "tokens": [{"name": "t", "value": TOKEN, "permissions": ["*"]}],
    "zones": [{"name": "example.com", "dns_records": [{"type": "A", "name": "www", "content": "192.0.2.1"}]}],
}


async def test_in_process_app() -> None:
    app = create_app(STATE, rate_limit=(3, 60.0), lockout=30.0)
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://emulator", headers=headers) as http:
        zones = (await http.get("/client/v4/zones")).json()
        assert [z["name"] for z in zones["result"]] == ["example.com"]
        records = (await http.get(f"/client/v4/zones/{zones['result'][0]['id']}/dns_records")).json()
        assert [(r["name"], r["proxied"], r["ttl"]) for r in records["result"]] == [("www.example.com", False, 1)]

        await http.post("/__emulator/faults", json={"route": "verify", "kind": "drop", "count": 1})
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get("/client/v4/user/tokens/verify")

        # The dropped call never reached the API, so it did not count: this is the third call of three.
        assert (await http.get("/client/v4/user/tokens/verify")).status_code == 200
        limited = await http.get("/client/v4/user/tokens/verify")
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "30"
        assert limited.json()["errors"] == [
            {"code": 971, "message": "Please wait and consider throttling your request speed"}
        ]


def test_invalid_state_is_refused() -> None:
    with pytest.raises(SeedError, match="unknown account"):
        create_app({"zones": [{"name": "example.com", "account_id": "2" * 32}]})
