"""Scenario 4, hostile input: fuzzed objects of every kind through the real API server with kflare's webhooks
registered; fuzzed AdmissionReviews straight at the webhook; oversized and deeply nested bodies; and manifests that
would take over what another installation or a foreign rule owns.

What must hold: no webhook answers 5xx, every refusal names its field, what is accepted is valid per the model, no
review hangs, the process serves afterwards, and nothing foreign is overwritten or deleted."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from app.api import KINDS, DNSRecord
from app.api.validation import object_errors
from app.controlplane import ControlPlane
from app.kube.client import MERGE_PATCH, KubeClient, KubeError
from tests.chaos.figures import Figures, size
from tests.chaos.hostile import (
    FIELD_PATH,
    OBJECT_LABEL,
    Mutator,
    _path,
    base_manifests,
    create,
    kflare_with_webhooks,
    registered,
    replace,
)
from tests.fixtures.controller import Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import user_kubeconfig
from tests.kinds import cf
from tests.unit.webhooks.reviews import review, sample

pytestmark = pytest.mark.integration

RECORD_ID_LABEL = DNSRecord.info.claim_label
SCENARIO = "4 hostile input"
SEED = 14
OBJECTS = size(ci=300, full=3000)
REVIEWS = size(ci=200, full=2000)
AT_ONCE = 8
MAX_REQUEST = 3 * 1024 * 1024
"""The API server's limit on a request body."""
UNDECODABLE = re.compile(
    r"cannot unmarshal|json parse error|does not match the expected API version|object provided is unrecognized"
    r"|cannot be handled as"
)


def _place(manifest: dict[str, Any], namespace: str, label: str, name: str, *, keep_name: bool = False) -> None:
    """The manifest in the test's namespace (or, cluster-scoped, with the label the webhook matches), named `name`
    unless the mutation was of the name itself."""
    if not isinstance(manifest.get("metadata"), dict):
        manifest["metadata"] = {}
    metadata = manifest["metadata"]
    if not keep_name or "name" not in metadata:
        metadata["name"] = name
    metadata["labels"] = {OBJECT_LABEL: label}
    if manifest.get("kind") == "CloudflareAccount":
        metadata.pop("namespace", None)
    else:
        metadata["namespace"] = namespace


class Tally:
    def __init__(self) -> None:
        self.sent = self.accepted = self.refused = self.undecodable = self.by_webhook = 0
        self.without_path: list[str] = []
        self.webhook_failures: list[str] = []
        self.accepted_invalid: list[str] = []
        self.other_errors: list[str] = []

    def accept(self, kind: str, stored: dict[str, Any], what: list[str]) -> None:
        self.accepted += 1
        errors = [str(e) for e in object_errors(kind, stored)]
        if errors:
            self.accepted_invalid.append(f"{kind} after {what}: {errors[:3]}")

    def refuse(self, kind: str, exc: KubeError, what: list[str]) -> None:
        message = exc.message
        if "failed calling webhook" in message or "internal error while validating" in message or exc.status >= 500:
            self.webhook_failures.append(f"{kind} after {what}: {exc.status} {message[:300]}")
            return
        if exc.status == 409:  # another update of the base object came first: not a refusal of the input
            self.other_errors.append(message[:200])
            return
        self.refused += 1
        self.by_webhook += "denied the request" in message
        if exc.status == 413 or (exc.status == 400 and UNDECODABLE.search(message)):
            # The API server's own framing, before any schema or webhook sees an object: nothing to name yet.
            self.undecodable += 1
            return
        if not FIELD_PATH.search(message):
            self.without_path.append(f"{kind} after {what}: {exc.status} {message[:300]}")


async def test_fuzzed_objects_through_the_api_server(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kube: ApiClient,
    namespace: str,
    tmp_path: Path,
    figures: Figures,
) -> None:
    raw = await KubeClient.connect(control_plane.kubeconfig_path)
    try:
        await _fuzz_objects(control_plane, fresh_emulator, kube, raw, namespace, tmp_path, figures)
    finally:
        await raw.close()


async def _fuzz_objects(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kube: ApiClient,
    raw: KubeClient,
    namespace: str,
    tmp_path: Path,
    figures: Figures,
) -> None:
    label = uuid.uuid4().hex[:10]
    bases = base_manifests()
    kinds = {m["kind"] for m in bases}
    tally = Tally()
    with kflare_with_webhooks(control_plane, fresh_emulator, tmp_path) as served:
        async with registered(kube, raw, served, namespace, label):
            # One stored object of every kind, for the updates.
            stored: dict[str, dict[str, Any]] = {}
            for kind in sorted(kinds):
                base = sample(kind)
                _place(base, namespace, label, f"base-{label}" if kind == "CloudflareAccount" else "base")
                stored[kind] = await create(raw, base, namespace, dry_run=False)
            gate = asyncio.Semaphore(AT_ONCE)

            def step(i: int) -> tuple[str, dict[str, Any], list[str], bool]:
                """Object `i`, from the seed and `i` alone (the same whatever the timing), made when its turn comes
                so that only the objects in flight are held."""
                mutator = Mutator(SEED * 1_000_003 + i, bases)
                base = bases[i % len(bases)]
                kind = str(base["kind"])
                updating = i % 4 == 3
                if updating:
                    fuzzed, what = mutator.mutate({"kind": kind, "spec": stored[kind].get("spec")}, spec_only=True)
                else:
                    fuzzed, what = mutator.mutate(base)
                    name = f"h{i}-{label}" if kind == "CloudflareAccount" else f"h{i}"
                    _place(fuzzed, namespace, label, name, keep_name=any(w.endswith("metadata.name") for w in what))
                return kind, fuzzed, what, updating

            async def one(i: int) -> None:
                async with gate:
                    kind, fuzzed, what, updating = step(i)
                    tally.sent += 1
                    too_large = len(json.dumps(fuzzed)) > MAX_REQUEST
                    try:
                        if updating:
                            current = await raw.request("GET", _self_link(stored[kind], namespace))
                            reply = await replace(raw, {**current, "spec": fuzzed.get("spec")}, namespace)
                        else:
                            reply = await create(raw, fuzzed, namespace, dry_run=True)
                    except KubeError as exc:
                        if too_large and exc.status in (0, 413):
                            # Refused for its size before it was read (the connection may close mid-upload).
                            tally.refused += 1
                            tally.undecodable += 1
                        else:
                            tally.refuse(kind, exc, what)
                        return
                    if updating or fuzzed.get("kind") in kinds:
                        tally.accept(kind if updating else str(fuzzed["kind"]), reply, what)
                    else:
                        tally.accepted += 1

            started = time.monotonic()
            await asyncio.gather(*(one(i) for i in range(OBJECTS)))
            elapsed = time.monotonic() - started
            five_xx = await served.webhook_5xx()
            crashes = served.crashes_in_log()
            for kind, obj in stored.items():
                await _delete(kube, kind, obj, namespace)

    figures.record(SCENARIO, "objects sent", tally.sent, target=f"{OBJECTS}", ok=tally.sent == OBJECTS)
    figures.record(SCENARIO, "objects accepted", tally.accepted, target="")
    figures.record(SCENARIO, "objects refused", tally.refused, target="")
    figures.record(SCENARIO, "  of which by kflare's webhook", tally.by_webhook, target="")
    figures.record(SCENARIO, "  of which undecodable (API server, before kflare)", tally.undecodable, target="")
    figures.record(SCENARIO, "objects per second", tally.sent / elapsed, target="")
    zero = {"target": "0"}
    figures.record(
        SCENARIO, "refusals without a field path", len(tally.without_path), **zero, ok=not tally.without_path
    )
    bad = len(tally.accepted_invalid)
    figures.record(SCENARIO, "accepted but invalid per the model", bad, **zero, ok=bad == 0)
    failures = len(tally.webhook_failures) + five_xx + len(crashes)
    figures.record(SCENARIO, "webhook 5xx / failed calls / crashes", failures, **zero, ok=failures == 0)
    assert not tally.webhook_failures, "\n".join(tally.webhook_failures[:10])
    assert five_xx == 0
    assert not crashes, "\n".join(crashes[:10])
    assert not tally.without_path, "\n".join(tally.without_path[:10])
    assert not tally.accepted_invalid, "\n".join(tally.accepted_invalid[:10])
    assert tally.sent == OBJECTS
    assert tally.refused > OBJECTS // 4, "the mutator makes mostly invalid objects"


def _self_link(obj: dict[str, Any], namespace: str) -> str:
    from tests.fixtures.controller import GROUP, PLURALS, VERSION

    plural = PLURALS[obj["kind"]]
    where = "" if obj["kind"] == "CloudflareAccount" else f"/namespaces/{namespace}"
    return f"/apis/{GROUP}/{VERSION}{where}/{plural}/{obj['metadata']['name']}"


async def _delete(kube: ApiClient, kind: str, obj: dict[str, Any], namespace: str) -> None:
    from kubernetes_asyncio import client

    from tests.fixtures.controller import GROUP, PLURALS, VERSION

    objects = client.CustomObjectsApi(kube)
    name = obj["metadata"]["name"]
    try:
        if kind == "CloudflareAccount":
            await objects.delete_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)
            await objects.patch_cluster_custom_object(
                GROUP,
                VERSION,
                PLURALS[kind],
                name,
                {"metadata": {"finalizers": None}},
                _content_type="application/merge-patch+json",
            )
        else:
            await objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], name)
    except ApiException:
        pass


# ---- AdmissionReviews straight at the webhook ------------------------------------------------------------------

HANG = 30.0
"""Seconds after which an answer counts as a hang (the API server gives up on a webhook after at most 30 s)."""
QUICK = 5.0
"""Seconds within which an oversized or deeply nested body must be refused."""
BODY_TIMEOUT = 2
"""The webhook's `--webhook-body-timeout` here, in seconds: a stalled body is answered 408 once it passes, which the
scenario waits for, rather than the default 10 s."""


def _review(i: int, bases: list[dict[str, Any]]) -> tuple[str, str, bytes, dict[str, str]]:
    """(what, plural, body, headers) of hostile request `i`, from the seed and `i` alone: the frame broken every way,
    or a valid frame around a fuzzed object."""
    mutator = Mutator((SEED + 1) * 1_000_003 + i, bases)
    rng = mutator.rng
    json_headers = {"Content-Type": "application/json"}
    base = bases[i % len(bases)]
    kind = str(base["kind"])
    plural = next(m.info.plural for m in KINDS if m.info.kind == kind)
    valid = review("CREATE", base, kind=kind)
    choice = rng.randrange(14)
    what = ""
    body: Any
    if choice == 0:
        text = json.dumps(valid)
        what, body = "truncated JSON", text[: rng.randrange(len(text))].encode()
    elif choice == 1:
        what, body = "random bytes", rng.randbytes(rng.choice((1, 10, 1000, 100_000)))
    elif choice == 2:
        what, body = "wrong apiVersion", json.dumps({**valid, "apiVersion": rng.choice(WRONG_VERSIONS)}).encode()
    elif choice == 3:
        what, body = "missing request", json.dumps({k: v for k, v in valid.items() if k != "request"}).encode()
    elif choice == 4:
        broken = {**valid, "request": rng.choice((None, [], "x", 1, {}, {"uid": ""}, {"uid": "u" * 10_000}))}
        what, body = "broken request", json.dumps(broken).encode()
    elif choice == 5:
        request = dict(valid["request"])
        request.pop(rng.choice(("uid", "kind", "operation", "object")))
        what, body = "request missing a field", json.dumps({**valid, "request": request}).encode()
    elif choice == 6:
        request = {**valid["request"], "operation": rng.choice(("UPDATE", "DELETE", "CONNECT", "bogus", ""))}
        what, body = "odd operation", json.dumps({**valid, "request": request}).encode()
    elif choice == 7:
        other = rng.choice([m for m in KINDS if m.info.kind != kind]).info.kind
        what, body = "another kind", json.dumps(review("CREATE", base, kind=other)).encode()
    elif choice == 8:
        depth = rng.choice((1_000, 100_000, 1_000_000))
        what, body = f"nested {depth} deep", ("[" * depth + "]" * depth).encode()
    elif choice == 9:
        depth = rng.choice((200, 5_000, 50_000))
        nested = "{}"
        obj = json.dumps({**valid["request"], "object": "@"})
        nested = '{"a":' * depth + "1" + "}" * depth
        text = json.dumps({**valid, "request": "@"}).replace('"@"', obj).replace('"@"', nested)
        what, body = f"object nested {depth} deep", text.encode()
    elif choice == 10:
        what, body = "oversized", b'{"apiVersion":"admission.k8s.io/v1","x":"' + b"a" * (4 * 1024 * 1024) + b'"}'
    elif choice == 11:
        fuzzed, mutations = mutator.mutate(base)
        request = {**valid["request"], "object": fuzzed}
        if rng.random() < 0.5:
            request = {**request, "operation": "UPDATE", "oldObject": base}
        what, body = f"fuzzed object {mutations}", json.dumps({**valid, "request": request}).encode()
    elif choice == 12:
        what, body = (
            "unicode and control characters",
            json.dumps(valid, ensure_ascii=False).replace('"uid": "', '"uid": "\\u0000\u202e\U0001f4a5').encode(),
        )
    else:
        what, body = "duplicate keys", json.dumps(valid)[:-1].encode() + b', "request": {"uid": 5}}'
    headers = json_headers if rng.random() < 0.9 else {"Content-Type": rng.choice(("text/plain", "", "a/b"))}
    return what, plural if rng.random() < 0.95 else "nope", body, headers


WRONG_VERSIONS = ("admission.k8s.io/v1beta1", "v1", "", "admission.k8s.io/v2", None, 1, ["admission.k8s.io/v1"])


def _sent_uid(body: bytes) -> Any:
    """The request's uid as sent; for bodies nested deeper than this process parses, the first uid in the text
    (the request's own comes before its object in every body `_review` makes)."""
    try:
        return json.loads(body)["request"]["uid"]
    except RecursionError:
        found = re.search(rb'"uid": "([^"\\]*)"', body)
        if found is None:
            raise ValueError("no uid in the body") from None
        return found.group(1).decode()


def _well_formed_answer(reply: httpx.Response, body: bytes) -> str | None:
    """None when `reply` is a 4xx or an AdmissionReview answering the request; else what is wrong."""
    if 400 <= reply.status_code < 500:
        return None
    if reply.status_code != 200:
        return f"status {reply.status_code}"
    try:
        answer = reply.json()
        response = answer["response"]
        sent = _sent_uid(body)
    except (ValueError, KeyError, TypeError) as exc:
        return f"200 but no AdmissionReview answer: {type(exc).__name__} {reply.text[:200]}"
    if answer.get("apiVersion") != "admission.k8s.io/v1" or answer.get("kind") != "AdmissionReview":
        return f"200 with a wrong frame: {reply.text[:200]}"
    if response.get("uid") != sent or not isinstance(response.get("allowed"), bool):
        return f"200 answering another uid or without allowed: {reply.text[:200]}"
    if not response["allowed"] and not (response.get("status") or {}).get("message"):
        return f"a denial without a message: {reply.text[:200]}"
    if not response["allowed"] and not FIELD_PATH.search(response["status"]["message"]):
        return f"a denial without a field path: {response['status']['message'][:200]}"
    return None


async def test_fuzzed_reviews_straight_at_the_webhook(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    tmp_path: Path,
    figures: Figures,
) -> None:
    bases = base_manifests()
    problems: list[str] = []
    hangs: list[str] = []
    slow_refusals: list[str] = []
    answered: dict[int, int] = {}
    with kflare_with_webhooks(
        control_plane, fresh_emulator, tmp_path, f"--webhook-body-timeout={BODY_TIMEOUT}s"
    ) as served:
        async with served.http(timeout=HANG) as http:
            gate = asyncio.Semaphore(AT_ONCE)

            async def one(i: int) -> None:
                async with gate:
                    what, plural, body, headers = _review(i, bases)
                    started = time.monotonic()
                    try:
                        reply = await http.post(
                            f"{served.webhook_url}/validate/{plural}", content=body, headers=headers
                        )
                    except httpx.TimeoutException:
                        hangs.append(what)
                        return
                    except httpx.TransportError as exc:
                        problems.append(f"{what}: connection {type(exc).__name__}")
                        return
                    took = time.monotonic() - started
                answered[reply.status_code] = answered.get(reply.status_code, 0) + 1
                wrong = _well_formed_answer(reply, body)
                if wrong is not None:
                    problems.append(f"{what}: {wrong}")
                if ("nested" in what or what == "oversized") and took > QUICK and reply.status_code != 200:
                    slow_refusals.append(f"{what}: {took:.1f}s")

            async def streamed_oversize() -> None:
                """No Content-Length: the body is cut off at the limit while it streams, not after."""

                async def chunks() -> Any:
                    for _ in range(64):
                        yield b"a" * (128 * 1024)

                started = time.monotonic()
                reply = await http.post(f"{served.webhook_url}/validate/zones", content=chunks())
                took = time.monotonic() - started
                answered[reply.status_code] = answered.get(reply.status_code, 0) + 1
                if reply.status_code != 413:
                    problems.append(f"streamed oversize: {reply.status_code}")
                if took > QUICK:
                    slow_refusals.append(f"streamed oversize: {took:.1f}s")

            async def stalled() -> None:
                """Half a body, then nothing: answered 408 at the body timeout while the body is still awaited,
                not held forever. A socket of its own, as an HTTP client reads no answer before its body is sent."""
                context = ssl.create_default_context(cadata=served.ca_pem.decode())
                port = int(served.webhook_url.rpartition(":")[2])
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
                )
                part = b'{"apiVersion": "admission.k8s.io/v1", '
                writer.write(
                    b"POST /validate/zones HTTP/1.1\r\nHost: kflare\r\nContent-Type: application/json\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(part), part)
                )
                try:
                    status = await asyncio.wait_for(reader.readline(), HANG)
                except TimeoutError:
                    hangs.append("stalled body")
                    return
                finally:
                    writer.close()
                code = int(status.split()[1]) if status.startswith(b"HTTP/1.1 ") else 0
                answered[code] = answered.get(code, 0) + 1
                if code != 408:
                    problems.append(f"stalled body: {status!r}")

            await asyncio.gather(stalled(), streamed_oversize(), *(one(i) for i in range(REVIEWS)))
            five_xx = await served.webhook_5xx()
            # Still serving: a valid review is answered, and the process is ready.
            ok = review("CREATE", sample("Zone"), kind="Zone")
            after = await http.post(f"{served.webhook_url}/validate/zones", json=ok)
            still_serving = after.status_code == 200 and after.json()["response"]["allowed"] is True
            async with httpx.AsyncClient(timeout=10) as plain:
                ready = await plain.get(f"http://127.0.0.1:{served.proc.probe_port}/readyz")
            still_serving = still_serving and ready.status_code == 200
            crashes = served.crashes_in_log()

    sent = REVIEWS + 2
    figures.record(SCENARIO, "reviews fuzzed", sent, target="")
    figures.record(SCENARIO, "  answers by status", " ".join(f"{k}:{v}" for k, v in sorted(answered.items())))
    figures.record(
        SCENARIO,
        "reviews answered 5xx or malformed",
        len(problems) + five_xx,
        target="0",
        ok=not problems and five_xx == 0,
    )
    figures.record(SCENARIO, "review hangs", len(hangs), target="0", ok=not hangs)
    figures.record(
        SCENARIO,
        f"oversized/nested refused slower than {QUICK:g}s",
        len(slow_refusals),
        target="0",
        ok=not slow_refusals,
    )
    figures.record(
        SCENARIO, "serving after the fuzzing", "yes" if still_serving else "no", target="yes", ok=still_serving
    )
    assert not problems, "\n".join(problems[:10])
    assert five_xx == 0
    assert not hangs, hangs
    assert not slow_refusals, slow_refusals
    assert not crashes, "\n".join(crashes[:10])
    assert still_serving


# ---- what another installation or a foreign rule owns -----------------------------------------------------------


def _snapshot(emulator: EmulatorProcess, zone_id: str, account_id: str) -> dict[str, Any]:
    """Every object in the zone and the account that kflare did not make, as Cloudflare holds it."""
    records = cf(emulator, "GET", f"/zones/{zone_id}/dns_records", params={"per_page": 1000})
    ruleset = cf(emulator, "GET", f"/zones/{zone_id}/rulesets/phases/http_request_firewall_custom/entrypoint")
    namespaces = cf(emulator, "GET", f"/accounts/{account_id}/storage/kv/namespaces", params={"per_page": 1000})
    lists = cf(emulator, "GET", f"/accounts/{account_id}/rules/lists")
    headers = cf(emulator, "GET", f"/zones/{zone_id}/managed_headers")
    keep = ("id", "name", "type", "content", "comment", "proxied", "ttl")
    return {
        "records": sorted(tuple((k, str(r.get(k))) for k in keep) for r in records),
        "foreign rules": [
            (r["id"], r["expression"], r["action"], r.get("enabled")) for r in ruleset["rules"] if not r.get("ref")
        ],
        "kv": sorted((n["id"], n["title"]) for n in namespaces),
        "lists": sorted((x["id"], x["name"], x.get("description")) for x in lists),
        "transforms on": sorted(
            t["id"] for t in [*headers["managed_request_headers"], *headers["managed_response_headers"]] if t["enabled"]
        ),
    }


async def test_what_others_own_is_never_overwritten_or_deleted(
    control_plane: ControlPlane,
    fresh_emulator: EmulatorProcess,
    kflare_crds: None,
    kube: ApiClient,
    kflare: Kflare,
    tmp_path: Path,
    figures: Figures,
) -> None:
    emulator = fresh_emulator
    label = uuid.uuid4().hex[:10]
    # Not the controller's identity (the webhook trusts that one with its own labels): a user as powerful, as an
    # administrator of the cluster copying a manifest, or a tool with broad rights, would be.
    raw = await KubeClient.connect(user_kubeconfig(control_plane, "mallory", groups=["system:masters"]))
    refused: list[str] = []
    reported: list[str] = []
    carried_out: list[str] = []
    with kflare_with_webhooks(control_plane, emulator, tmp_path) as served:
        try:
            async with registered(kube, raw, served, kflare.namespace, label):
                domain = f"{label}.example"
                zone_id = await kflare.ready_zone(domain)
                account_id = emulator.account_id
                base = f"/accounts/{account_id}"
                # Another installation's objects (made outside this cluster), and a foreign rule.
                other = "managed by kflare in another cluster"
                cname = cf(
                    emulator,
                    "POST",
                    f"/zones/{zone_id}/dns_records",
                    json={"type": "CNAME", "name": f"app.{domain}", "content": "a.example.net", "comment": other},
                )
                a_record = cf(
                    emulator,
                    "POST",
                    f"/zones/{zone_id}/dns_records",
                    json={"type": "A", "name": f"www.{domain}", "content": "192.0.2.10", "comment": other},
                )
                cf(
                    emulator,
                    "POST",
                    f"/zones/{zone_id}/rulesets",
                    json={
                        "name": "default",
                        "kind": "zone",
                        "phase": "http_request_firewall_custom",
                        "rules": [{"expression": "ip.src eq 203.0.113.9", "action": "block", "description": "foreign"}],
                    },
                )
                cf(emulator, "POST", f"{base}/storage/kv/namespaces", json={"title": f"{label}-shared"})
                cf(emulator, "POST", f"{base}/rules/lists", json={"name": f"{label}_office", "kind": "ip"})
                cf(
                    emulator,
                    "PATCH",
                    f"/zones/{zone_id}/managed_headers",
                    json={"managed_response_headers": [{"id": "add_security_headers", "enabled": True}]},
                )
                before = _snapshot(emulator, zone_id, account_id)

                # Everything below asks for deletion with its resource: what it took, it would delete.
                delete = {"kflare.dev/deletion-policy": "delete"}
                account = {"name": kflare.account}
                hostile: list[tuple[str, str, dict[str, Any], dict[str, str], dict[str, str]]] = [
                    (
                        "DNSRecord",
                        "same-cname",
                        {
                            "zoneRef": {"name": "zone"},
                            "name": f"app.{domain}",
                            "type": "CNAME",
                            "content": "evil.example.net",
                        },
                        {},
                        delete,
                    ),
                    (
                        "DNSRecord",
                        "claims-a",
                        {"zoneRef": {"name": "zone"}, "name": f"www2.{domain}", "type": "A", "content": "192.0.2.66"},
                        {RECORD_ID_LABEL: a_record["id"]},
                        delete,
                    ),
                    (
                        "DNSRecord",
                        "claims-cname",
                        {
                            "zoneRef": {"name": "zone"},
                            "name": f"app.{domain}",
                            "type": "CNAME",
                            "content": "evil.example.net",
                        },
                        {RECORD_ID_LABEL: cname["id"]},
                        delete,
                    ),
                    ("KVNamespace", "same-kv", {"accountRef": account, "title": f"{label}-shared"}, {}, delete),
                    (
                        "IPList",
                        "same-list",
                        {
                            "accountRef": account,
                            "name": f"{label}_office",
                            "kind": "ip",
                            "items": [{"ip": "198.51.100.1"}],
                        },
                        {},
                        delete,
                    ),
                    (
                        "ManagedTransform",
                        "transforms",
                        {
                            "zoneRef": {"name": "zone"},
                            "managedResponseHeaders": [{"id": "add_security_headers", "enabled": False}],
                        },
                        {},
                        delete,
                    ),
                    (
                        "WAFCustomRule",
                        "beside",
                        {
                            "zoneRef": {"name": "zone"},
                            "expression": "ip.src eq 203.0.113.9",
                            "action": "managed_challenge",
                            "priority": 1,
                        },
                        {},
                        delete,
                    ),
                ]
                made: list[tuple[str, str]] = []
                for kind, name, spec, labels, annotations in hostile:
                    manifest = {
                        "apiVersion": "kflare.dev/v1alpha1",
                        "kind": kind,
                        "spec": spec,
                        "metadata": {
                            "name": name,
                            "namespace": kflare.namespace,
                            "labels": labels,
                            "annotations": annotations,
                        },
                    }
                    try:
                        await create(raw, manifest, kflare.namespace, dry_run=False)
                    except KubeError as exc:
                        refused.append(f"{kind} {name}: {exc.message}")
                        continue
                    made.append((kind, name))
                # A claim written later, onto a resource that exists (kubectl apply of a manifest carrying it).
                labelled = {"kind": "DNSRecord", "metadata": {"labels": {RECORD_ID_LABEL: cname["id"]}}}
                try:
                    await raw.request(
                        "PATCH",
                        _path(labelled, kflare.namespace, "same-cname"),
                        body={"metadata": labelled["metadata"]},
                        content_type=MERGE_PATCH,
                    )
                except KubeError as exc:
                    refused.append(f"DNSRecord same-cname, labelled later: {exc.message}")

                expected = {
                    "same-cname": "AlreadyExists",
                    "same-kv": "AlreadyExists",
                    "same-list": "AlreadyExists",
                    "transforms": "AlreadyExists",
                    "claims-a": None,
                    "claims-cname": None,
                }
                for kind, name in made:
                    if kind == "WAFCustomRule":
                        await kflare.ready(kind, name, reason="Synced")
                        continue
                    obj = await kflare.ready(kind, name, status="False", reason=expected.get(name), timeout=30)
                    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
                    reported.append(f"{kind} {name}: {ready['reason']}")
                during = _snapshot(emulator, zone_id, account_id)
                for kind, name in made:
                    await kflare.delete(kind, name)
                for kind, name in made:
                    await kflare.gone(kind, name)
                after = _snapshot(emulator, zone_id, account_id)
                for what in before:
                    for moment, state in (("while applied", during), ("after deletion", after)):
                        gone = [o for o in before[what] if o not in state[what]]
                        if gone:
                            carried_out.append(f"{what} {moment}: {gone} changed or deleted")
                if before["transforms on"] != after["transforms on"]:
                    carried_out.append(f"managed transforms turned {after['transforms on']}")
        finally:
            await raw.close()

    figures.record(SCENARIO, "takeover manifests refused at admission", len(refused), target="")
    figures.record(SCENARIO, "takeover manifests reported in status", len(reported), target="")
    figures.record(SCENARIO, "foreign objects overwritten or deleted", len(carried_out), target="0", ok=not carried_out)
    assert not carried_out, "\n".join(carried_out)
    assert all(FIELD_PATH.search(why) for why in refused), refused
    assert len(refused) == 3, "\n".join(refused)  # the claim labels, at creation and added later
    assert len(reported) == 4, reported
