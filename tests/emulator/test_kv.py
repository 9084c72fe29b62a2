"""Workers KV through the official SDK: namespaces (create, rename, list, delete) and the values they hold."""

from __future__ import annotations

import cloudflare
import httpx
import pytest
from cloudflare.types.kv import Namespace

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess


def test_create_rename_get_delete(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    created = cf.kv.namespaces.create(account_id=account, title="cache")
    assert isinstance(created, Namespace)
    conforms(created)
    assert created.title == "cache"
    assert len(created.id) == 32

    renamed = cf.kv.namespaces.update(namespace_id=created.id, account_id=account, title="cache-v2")
    conforms(renamed)
    assert (renamed.id, renamed.title) == (created.id, "cache-v2")
    fetched = cf.kv.namespaces.get(namespace_id=created.id, account_id=account)
    assert fetched is not None
    assert fetched.title == "cache-v2"

    eu = cf.kv.namespaces.create(account_id=account, title="sessions", jurisdiction="eu")
    assert eu is not None
    assert eu.jurisdiction == "eu"

    assert cf.kv.namespaces.delete(namespace_id=created.id, account_id=account) is not None
    with pytest.raises(cloudflare.NotFoundError):
        cf.kv.namespaces.get(namespace_id=created.id, account_id=account)
    assert [n.title for n in cf.kv.namespaces.list(account_id=account)] == ["sessions"]


def test_titles_are_unique_per_account(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    first = cf.kv.namespaces.create(account_id=account, title="config")
    other = cf.kv.namespaces.create(account_id=account, title="other")
    assert first is not None
    assert other is not None
    with pytest.raises(cloudflare.BadRequestError) as duplicate:
        cf.kv.namespaces.create(account_id=account, title="config")
    assert [e.code for e in duplicate.value.errors] == [10014]
    with pytest.raises(cloudflare.BadRequestError) as rename_onto:
        cf.kv.namespaces.update(namespace_id=other.id, account_id=account, title="config")
    assert [e.code for e in rename_onto.value.errors] == [10014]
    # Renaming to its own title is no clash.
    assert cf.kv.namespaces.update(namespace_id=first.id, account_id=account, title="config").id == first.id


def test_list_pages_and_order(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    fresh_emulator.seed({"kv_namespaces": [{"title": f"ns-{i:02}"} for i in range(25)]})
    first = cf.kv.namespaces.list(account_id=account, per_page=10, order="title")
    assert [n.title for n in first.result] == [f"ns-{i:02}" for i in range(10)]
    assert first.result_info is not None
    assert first.result_info.total_count == 25
    titles = [n.title for n in cf.kv.namespaces.list(account_id=account, per_page=10, order="title")]
    assert titles == [f"ns-{i:02}" for i in range(25)]
    newest_first = cf.kv.namespaces.list(account_id=account, order="title", direction="desc", per_page=5)
    assert newest_first.result[0].title == "ns-24"
    for namespace in first.result:
        conforms(namespace)


def test_values_write_read_list_and_go_with_their_namespace(
    cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess
) -> None:
    account = fresh_emulator.account_id
    namespace = cf.kv.namespaces.create(account_id=account, title="data")
    assert namespace is not None
    values = cf.kv.namespaces.values
    values.update(key_name="greeting", account_id=account, namespace_id=namespace.id, value=b"hello")
    values.update(
        key_name="config/flags", account_id=account, namespace_id=namespace.id, value=b"on", metadata={"v": 2}
    )
    assert values.get(key_name="greeting", account_id=account, namespace_id=namespace.id).text() == "hello"
    assert values.get(key_name="config/flags", account_id=account, namespace_id=namespace.id).text() == "on"

    keys = list(cf.kv.namespaces.keys.list(namespace_id=namespace.id, account_id=account))
    assert [(k.name, k.metadata) for k in keys] == [("config/flags", {"v": 2}), ("greeting", None)]
    for key in keys:
        conforms(key)
    assert [
        k.name for k in cf.kv.namespaces.keys.list(namespace_id=namespace.id, account_id=account, prefix="conf")
    ] == ["config/flags"]

    # A raw body (no form) is a value too.
    written = httpx.put(
        f"{fresh_emulator.base_url}/accounts/{account}/storage/kv/namespaces/{namespace.id}/values/raw",
        content=b"plain bytes",
        headers={"Authorization": f"Bearer {fresh_emulator.token}", "Content-Type": "application/octet-stream"},
    )
    assert written.json()["success"] is True
    assert values.get(key_name="raw", account_id=account, namespace_id=namespace.id).read() == b"plain bytes"

    values.delete(key_name="greeting", account_id=account, namespace_id=namespace.id)
    with pytest.raises(cloudflare.NotFoundError):
        values.get(key_name="greeting", account_id=account, namespace_id=namespace.id)

    # Deleting the namespace deletes its data: a namespace made again under the same title starts empty.
    cf.kv.namespaces.delete(namespace_id=namespace.id, account_id=account)
    assert fresh_emulator.state_dump()["kv_values"] == []
    again = cf.kv.namespaces.create(account_id=account, title="data")
    assert again is not None
    assert list(cf.kv.namespaces.keys.list(namespace_id=again.id, account_id=account)) == []


def test_keys_page_with_a_cursor(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    namespace_id = "c" * 32
    fresh_emulator.seed(
        {
            "kv_namespaces": [
                {
                    "id": namespace_id,
                    "title": "many",
                    "kv_values": [{"name": f"k{i:03}", "value": "x"} for i in range(25)],
                }
            ]
        }
    )
    page = cf.kv.namespaces.keys.list(namespace_id=namespace_id, account_id=account, limit=10)
    assert len(page.result) == 10
    assert page.result_info is not None
    assert page.result_info.cursor
    assert [k.name for k in cf.kv.namespaces.keys.list(namespace_id=namespace_id, account_id=account, limit=10)] == [
        f"k{i:03}" for i in range(25)
    ]
    assert len(fresh_emulator.calls(method="GET", path=r"/keys$")) == 1 + 3


def test_refusals(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    with pytest.raises(cloudflare.NotFoundError) as missing:
        cf.kv.namespaces.get(namespace_id="d" * 32, account_id=account)
    assert [e.code for e in missing.value.errors] == [10013]
    with pytest.raises(cloudflare.BadRequestError) as malformed:
        cf.kv.namespaces.get(namespace_id="not-an-id", account_id=account)
    assert [e.code for e in malformed.value.errors] == [7003, 7000]

    reader = fresh_emulator.client(fresh_emulator.add_token(["workers_kv:read"])["value"])
    assert list(reader.kv.namespaces.list(account_id=account)) == []
    with pytest.raises(cloudflare.PermissionDeniedError) as denied:
        reader.kv.namespaces.create(account_id=account, title="nope")
    assert [e.code for e in denied.value.errors] == [10000]
    elsewhere = fresh_emulator.client(fresh_emulator.add_token(["*"], accounts=["e" * 32])["value"])
    with pytest.raises(cloudflare.PermissionDeniedError):
        elsewhere.kv.namespaces.list(account_id=account)


def test_dump_seeds_back(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    namespace = cf.kv.namespaces.create(account_id=account, title="kept", jurisdiction="eu")
    assert namespace is not None
    cf.kv.namespaces.values.update(
        key_name="bin", account_id=account, namespace_id=namespace.id, value=b"\x00\xff", metadata={"a": 1}
    )
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump
    read = cf.kv.namespaces.values.get(key_name="bin", account_id=account, namespace_id=namespace.id)
    assert read.read() == b"\x00\xff"
