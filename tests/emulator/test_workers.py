"""Workers scripts through the official SDK: both upload formats, bindings, listing, settings, content, delete and
the Free plan's Worker count."""

from __future__ import annotations

from typing import Any

import cloudflare
import pytest
from cloudflare.types.workers import ScriptUpdateResponse

from tests.emulator.schema import conforms
from tests.fixtures.emulator import EmulatorProcess

MODULE = b"export default { async fetch() { return new Response('hi') } }"
SERVICE_WORKER = b"addEventListener('fetch', e => e.respondWith(new Response('hi')))"


def codes(exc: cloudflare.APIStatusError) -> list[int]:
    return [e.code for e in exc.errors]


def upload(cf: cloudflare.Cloudflare, account: str, name: str, **metadata: Any) -> ScriptUpdateResponse:
    metadata.setdefault("main_module", "index.js")
    files = metadata.pop("files", [("index.js", MODULE, "application/javascript+module")])
    return cf.workers.scripts.update(script_name=name, account_id=account, metadata=metadata, files=files)


def storage(cf: cloudflare.Cloudflare, account: str) -> tuple[str, str, str]:
    namespace = cf.kv.namespaces.create(account_id=account, title="kv")
    cf.r2.buckets.create(account_id=account, name="bucket", cf_r2_jurisdiction="eu")
    database = cf.d1.database.create(account_id=account, name="db")
    assert namespace is not None
    assert database.uuid is not None
    return namespace.id, "bucket", database.uuid


def test_module_upload_with_every_binding(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    namespace_id, bucket, database_id = storage(cf, account)
    bindings: Any = [
        {"type": "plain_text", "name": "GREETING", "text": "hello"},
        {"type": "secret_text", "name": "API_KEY", "text": "s3cr3t"},
        {"type": "kv_namespace", "name": "CACHE", "namespace_id": namespace_id},
        {"type": "r2_bucket", "name": "FILES", "bucket_name": bucket, "jurisdiction": "eu"},
        {"type": "d1", "name": "DB", "database_id": database_id},
    ]
    uploaded = upload(
        cf, account, "api", compatibility_date="2024-09-23", compatibility_flags=["nodejs_compat"], bindings=bindings
    )
    assert isinstance(uploaded, ScriptUpdateResponse)
    conforms(uploaded)
    assert (uploaded.id, uploaded.has_modules, uploaded.compatibility_date) == ("api", True, "2024-09-23")
    assert uploaded.compatibility_flags == ["nodejs_compat"]
    assert uploaded.etag
    assert uploaded.created_on == uploaded.modified_on

    settings = cf.workers.scripts.script_and_version_settings.get(script_name="api", account_id=account)
    conforms(settings)
    shown = [b.to_dict() for b in settings.bindings or []]
    assert {b["name"]: b["type"] for b in shown} == {
        "GREETING": "plain_text",
        "API_KEY": "secret_text",
        "CACHE": "kv_namespace",
        "FILES": "r2_bucket",
        "DB": "d1",
    }
    assert "text" not in next(b for b in shown if b["name"] == "API_KEY"), "secret values are never shown"
    assert (
        "s3cr3t"
        not in cf.workers.scripts.script_and_version_settings.with_raw_response.get(
            script_name="api", account_id=account
        ).http_response.text
    )
    assert "export default" in cf.workers.scripts.get(script_name="api", account_id=account)


def test_service_worker_upload(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    uploaded = upload(
        cf,
        account,
        "legacy",
        main_module=None,
        body_part="worker.js",
        files=[("worker.js", SERVICE_WORKER, "application/javascript")],
    )
    assert uploaded.has_modules is False
    assert uploaded.compatibility_date == "2021-11-02", "the oldest date when none is given"
    assert cf.workers.scripts.get(script_name="legacy", account_id=account) == SERVICE_WORKER.decode()


def test_reupload_keeps_identity_and_moves_modified_on(
    cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess
) -> None:
    account = fresh_emulator.account_id
    first = upload(cf, account, "app")
    same_code = upload(cf, account, "app", compatibility_date="2024-01-01")
    assert (same_code.tag, same_code.created_on, same_code.etag) == (first.tag, first.created_on, first.etag)
    assert same_code.modified_on is not None
    assert first.modified_on is not None
    assert same_code.modified_on > first.modified_on
    new_code = upload(cf, account, "app", files=[("index.js", MODULE + b"\n// v2", "application/javascript+module")])
    assert new_code.etag != first.etag

    listed = list(cf.workers.scripts.list(account_id=account))
    assert [(s.id, s.etag, s.modified_on) for s in listed] == [("app", new_code.etag, new_code.modified_on)]
    for script in listed:
        conforms(script)


def test_settings_patch_keeps_secrets_and_shows_as_a_change(
    cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess
) -> None:
    account = fresh_emulator.account_id
    uploaded = upload(cf, account, "app", bindings=[{"type": "secret_text", "name": "TOKEN", "text": "one"}])
    edited = cf.workers.scripts.script_and_version_settings.edit(
        script_name="app",
        account_id=account,
        settings={
            "compatibility_flags": ["nodejs_compat"],
            "bindings": [
                {"type": "secret_text", "name": "TOKEN"},  # type: ignore[typeddict-item]
                {"type": "plain_text", "name": "MODE", "text": "prod"},
            ],
        },
    )
    conforms(edited)
    assert edited.compatibility_flags == ["nodejs_compat"]
    assert sorted(b.name for b in edited.bindings or []) == ["MODE", "TOKEN"]
    dumped = fresh_emulator.state_dump()["workers_scripts"][0]["metadata"]["bindings"]
    assert next(b for b in dumped if b["name"] == "TOKEN")["text"] == "one", "the secret kept its value"
    listed = next(iter(cf.workers.scripts.list(account_id=account)))
    assert uploaded.modified_on is not None
    assert listed.modified_on is not None
    assert listed.modified_on > uploaded.modified_on
    assert listed.etag == uploaded.etag, "the code did not change"


def test_keep_bindings_carries_secrets_over_a_reupload(
    cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess
) -> None:
    account = fresh_emulator.account_id
    upload(cf, account, "app", bindings=[{"type": "secret_text", "name": "TOKEN", "text": "kept"}])
    upload(
        cf, account, "app", keep_bindings=["secret_text"], bindings=[{"type": "plain_text", "name": "A", "text": "1"}]
    )
    settings = cf.workers.scripts.script_and_version_settings.get(script_name="app", account_id=account)
    assert sorted((b.name, b.type) for b in settings.bindings or []) == [("A", "plain_text"), ("TOKEN", "secret_text")]
    upload(cf, account, "app", bindings=[])
    assert cf.workers.scripts.script_and_version_settings.get(script_name="app", account_id=account).bindings == []


def test_refused_uploads(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    with pytest.raises(cloudflare.BadRequestError) as no_module:
        upload(cf, account, "app", main_module="missing.js")
    assert codes(no_module.value) == [10021]
    with pytest.raises(cloudflare.BadRequestError) as no_entry:
        upload(cf, account, "app", main_module=None)
    assert codes(no_entry.value) == [10021]
    with pytest.raises(cloudflare.BadRequestError) as bad_kv:
        upload(cf, account, "app", bindings=[{"type": "kv_namespace", "name": "KV", "namespace_id": "a" * 32}])
    assert codes(bad_kv.value) == [10042]
    with pytest.raises(cloudflare.BadRequestError) as bad_bucket:
        upload(cf, account, "app", bindings=[{"type": "r2_bucket", "name": "B", "bucket_name": "nope"}])
    assert codes(bad_bucket.value) == [10021]
    with pytest.raises(cloudflare.BadRequestError) as duplicate_names:
        upload(
            cf,
            account,
            "app",
            bindings=[
                {"type": "plain_text", "name": "X", "text": "1"},
                {"type": "plain_text", "name": "X", "text": "2"},
            ],
        )
    assert codes(duplicate_names.value) == [10021]
    with pytest.raises(cloudflare.BadRequestError) as too_large:
        upload(cf, account, "app", files=[("index.js", b"x" * (3 * 1024 * 1024 + 1), "application/javascript+module")])
    assert codes(too_large.value) == [10027]
    assert list(cf.workers.scripts.list(account_id=account)) == []


def test_free_plan_worker_count(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    module = {"name": "index.js", "content": "export default {}"}
    fresh_emulator.seed(
        {
            "workers_scripts": [
                {"id": f"w{i}", "metadata": {"main_module": "index.js"}, "modules": [module]} for i in range(100)
            ]
        }
    )
    with pytest.raises(cloudflare.BadRequestError) as over:
        upload(cf, account, "one-too-many")
    assert codes(over.value) == [10037]
    assert upload(cf, account, "w7").id == "w7", "replacing a Worker is no new Worker"


def test_delete_and_not_found(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    upload(cf, account, "gone")
    cf.workers.scripts.delete(script_name="gone", account_id=account)
    with pytest.raises(cloudflare.NotFoundError) as missing:
        cf.workers.scripts.delete(script_name="gone", account_id=account)
    assert codes(missing.value) == [10007]
    with pytest.raises(cloudflare.NotFoundError):
        cf.workers.scripts.script_and_version_settings.get(script_name="gone", account_id=account)


def test_permissions(fresh_emulator: EmulatorProcess) -> None:
    reader = fresh_emulator.client(fresh_emulator.add_token(["workers_scripts:read"])["value"])
    assert list(reader.workers.scripts.list(account_id=fresh_emulator.account_id)) == []
    with pytest.raises(cloudflare.PermissionDeniedError):
        upload(reader, fresh_emulator.account_id, "nope")


def test_dump_seeds_back(cf: cloudflare.Cloudflare, fresh_emulator: EmulatorProcess) -> None:
    account = fresh_emulator.account_id
    namespace_id, _bucket, _database = storage(cf, account)
    upload(
        cf,
        account,
        "kept",
        bindings=[
            {"type": "secret_text", "name": "S", "text": "v"},
            {"type": "kv_namespace", "name": "KV", "namespace_id": namespace_id},
        ],
    )
    dump = fresh_emulator.state_dump()
    fresh_emulator.reset()
    fresh_emulator.seed(dump)
    assert fresh_emulator.state_dump() == dump
