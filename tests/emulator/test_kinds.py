"""What every object type shares, checked for each one the emulator declares (so a new type is covered by adding it):
the envelope and paging style of its list, its not-found answer, its place in the state file."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.emulator.collection import Kind
from app.emulator.kinds import KINDS
from app.emulator.paging import Cursor, PageNumbers, SinglePage
from tests.fixtures.emulator import EmulatorProcess

# Kinds reached straight from an account or a zone (deeper ones are covered through their parents' tests).
TOP = [kind for kind in KINDS if kind.parent in (None, "accounts", "zones")]


def _path(kind: Kind, account_id: str, zone_id: str) -> str:
    return kind.path.replace("{account_id}", account_id).replace("{zone_id}", zone_id)


@pytest.fixture
def http(fresh_emulator: EmulatorProcess) -> Any:
    headers = {"Authorization": f"Bearer {fresh_emulator.token}"}
    with httpx.Client(base_url=fresh_emulator.base_url, headers=headers) as client:
        yield client


@pytest.fixture
def zone_id(http: httpx.Client, fresh_emulator: EmulatorProcess) -> str:
    created = http.post("/zones", json={"name": "example.com", "account": {"id": fresh_emulator.account_id}})
    value: str = created.json()["result"]["id"]
    return value


@pytest.mark.parametrize("kind", [k for k in TOP if "list" in k.verbs], ids=lambda k: k.name)
def test_lists_answer_in_the_envelope_with_their_paging(
    kind: Kind, http: httpx.Client, fresh_emulator: EmulatorProcess, zone_id: str
) -> None:
    answer = http.get(_path(kind, fresh_emulator.account_id, zone_id))
    assert answer.status_code == 200
    body = answer.json()
    assert (body["success"], body["errors"]) == (True, [])
    info = body.get("result_info")
    if isinstance(kind.paging, PageNumbers):
        assert set(info) == {"page", "per_page", "count", "total_count", "total_pages"}
    elif isinstance(kind.paging, Cursor):
        assert set(info) == {"count", "cursor", "per_page"}
        assert info["cursor"] == "", "one page only: no cursor to follow"
    else:
        assert isinstance(kind.paging, SinglePage)
        assert info is None


@pytest.mark.parametrize("kind", [k for k in TOP if "get" in k.verbs or "delete" in k.verbs], ids=lambda k: k.name)
def test_an_unknown_object_is_a_404_in_the_envelope(
    kind: Kind, http: httpx.Client, fresh_emulator: EmulatorProcess, zone_id: str
) -> None:
    path = f"{_path(kind, fresh_emulator.account_id, zone_id)}/{kind.new_id()}"
    answer = http.get(path) if "get" in kind.verbs else http.delete(path)
    assert answer.status_code == 404
    body = answer.json()
    assert (body["success"], body["result"]) == (False, None)
    assert [e["code"] for e in body["errors"]] == [kind.not_found().errors[0]["code"]]


def test_every_kind_has_its_section_in_the_state_file(fresh_emulator: EmulatorProcess) -> None:
    dump = fresh_emulator.state_dump()
    assert set(dump) == {"tokens", *(kind.name for kind in KINDS)}
    fresh_emulator.seed(dump)  # a dump of the starting state seeds as it is
    assert fresh_emulator.state_dump() == dump
