"""The webhook app over HTTP (in process, through httpx's ASGI transport): reviews in, reviews out, and a clear
4xx, never a 5xx, for anything that is not a review it can answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api import KINDS
from tests.helpers import eventually
from tests.unit.webhooks.reviews import SAMPLES, changed, review, sample
from webhooks import MAX_BODY, create_app
from webhooks.review import cut_below


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app()


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://webhook") as client:
        yield client


async def post(http: httpx.AsyncClient, plural: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        return await http.post(f"/validate/{plural}", content=body, headers={"content-type": "application/json"})
    return await http.post(f"/validate/{plural}", json=body)


def answer(reply: httpx.Response, sent: dict[str, Any]) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == sent["request"]["uid"]
    response: dict[str, Any] = body["response"]
    return response


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.info.plural)
async def test_every_kind_is_served_by_its_plural(http: httpx.AsyncClient, model: Any) -> None:
    kind = model.info.kind
    sent = review("CREATE", sample(kind), kind=kind)
    assert answer(await post(http, model.info.plural, sent), sent) == {"uid": sent["request"]["uid"], "allowed": True}
    bad = review("CREATE", sample(kind, colour="blue"), kind=kind)
    response = answer(await post(http, model.info.plural, bad), bad)
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 422,
        "reason": "Invalid",
        "message": 'spec.colour: unknown field "colour"',
        "status": "Failure",
    }


async def test_a_denial_names_each_field(http: httpx.AsyncClient) -> None:
    old = sample("DNSRecord")
    sent = review("UPDATE", changed(old, type="TXT", content="x", proxied=True), old)
    response = answer(await post(http, "dnsrecords", sent), sent)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT; "
        'spec.type: type is immutable, it cannot change from "A" to "TXT" '
        "(delete the DNSRecord and create it again instead)"
    )


async def test_deletes_and_status_updates_pass(http: httpx.AsyncClient) -> None:
    invalid = sample("DNSRecord", type="TXT", content="x", proxied=True)
    for sent in (
        review("DELETE", None, invalid),
        review("UPDATE", {**invalid, "status": {"conditions": []}}, invalid),
        review("CONNECT"),
    ):
        assert answer(await post(http, "dnsrecords", sent), sent)["allowed"] is True


async def test_a_review_for_another_kind_is_denied(http: httpx.AsyncClient) -> None:
    sent = review("CREATE", sample("Zone"), kind="Zone")
    response = answer(await post(http, "dnsrecords", sent), sent)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert response["status"]["reason"] == "BadRequest"
    assert "this webhook validates DNSRecord (kflare.dev/v1alpha1), not Zone" in response["status"]["message"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("object"), "request.object: required on UPDATE"),
        (lambda r: r.pop("oldObject"), "request.oldObject: required on UPDATE"),
        (lambda r: r.update(object=["a"]), "request.object: must be a JSON object"),
        (lambda r: r.update(oldObject="old"), "request.oldObject: must be a JSON object"),
    ],
    ids=["no-object", "no-oldObject", "object-list", "oldObject-string"],
)
async def test_an_incomplete_update_is_denied(http: httpx.AsyncClient, mutate: Any, message: str) -> None:
    old = sample("DNSRecord")
    sent = review("UPDATE", changed(old, content="192.0.2.1"), old)
    mutate(sent["request"])
    response = answer(await post(http, "dnsrecords", sent), sent)
    assert response["allowed"] is False
    assert response["status"]["message"] == message
    assert response["status"]["code"] == 400


def _valid() -> dict[str, Any]:
    return review("CREATE", sample("DNSRecord"))


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"", "empty body"),
        (b"   ", "empty body"),
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b'"review"', "must be a JSON object"),
        (b"{}", "apiVersion: required"),
        (b'{"apiVersion": "v1", "kind": "Pod"}', "apiVersion: must be admission.k8s.io/v1; kind: must be AdmissionRe"),
        (json.dumps({**_valid(), "apiVersion": "admission.k8s.io/v1beta1"}).encode(), "apiVersion: must be"),
        (json.dumps({**_valid(), "kind": "TokenReview"}).encode(), "kind: must be AdmissionReview"),
        (json.dumps({**_valid(), "request": None}).encode(), "request: "),
        (json.dumps({**_valid(), "request": {**_valid()["request"], "uid": ""}}).encode(), "request.uid: "),
        (json.dumps({**_valid(), "request": {**_valid()["request"], "uid": None}}).encode(), "request.uid: "),
        (json.dumps({**_valid(), "request": {**_valid()["request"], "kind": "DNSRecord"}}).encode(), "request.kind"),
        (json.dumps({**_valid(), "request": {**_valid()["request"], "operation": 7}}).encode(), "request.operation"),
        (b"[" * 100_000 + b"]" * 100_000, "the body must be a JSON object"),
        (json.dumps({**_valid(), "request": {**_valid()["request"], "uid": "u" * 300}}).encode(), "request.uid: "),
    ],
    ids=lambda v: v[:24].decode(errors="replace") if isinstance(v, bytes) else None,
)
async def test_a_body_that_is_no_review_gets_400(http: httpx.AsyncClient, body: bytes, detail: str) -> None:
    reply = await post(http, "dnsrecords", body)
    assert reply.status_code == 400, reply.text
    assert detail in reply.json()["detail"]


CUT = b'"\\u0000kflare: nested too deep"'


@pytest.mark.parametrize(
    ("body", "depth", "cut"),
    [
        (b'[[["a"]]]', 2, b"[[" + CUT + b"]]"),
        (b'{"a": "[[[\\"]]", "b": [[{"c": [1]}], [[2]]]}', 2, b'{"a": "[[[\\"]]", "b": [' + CUT + b", " + CUT + b"]}"),
        (b"[[[[[]]]][[[[]]]]]", 3, b"[[[" + CUT + b"]][[" + CUT + b"]]]"),
        (b"[" * 1_000_000 + b"]" * 1_000_000, 128, b"[" * 128 + CUT + b"]" * 128),
        (b"[[1]]", 3, None),
    ],
    ids=["inner", "strings", "runs", "a million", "shallow"],
)
def test_what_is_nested_too_deep_is_cut_and_the_rest_kept(body: bytes, depth: int, cut: bytes | None) -> None:
    """Brackets inside strings (escaped quotes included) do not count; a run of brackets is cut where it crosses
    the depth and kept from where it comes back."""
    assert cut_below(body, depth) == cut


async def test_deep_nesting_inside_the_object_is_denied_naming_the_field(http: httpx.AsyncClient) -> None:
    valid = json.dumps(_valid())
    nested = "[" * 50_000 + "]" * 50_000
    body = valid.replace('"spec": {', f'"spec": {{"data": {nested}, ', 1).encode()
    reply = await post(http, "dnsrecords", body)
    assert reply.status_code == 200, reply.text
    response = reply.json()["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "spec.data[0]: nested more than 128 levels deep; spec.data: Input should be a valid dictionary"
    )


async def test_an_unknown_plural_is_404(http: httpx.AsyncClient) -> None:
    reply = await post(http, "pods", _valid())
    assert reply.status_code == 404
    plurals = ", ".join(sorted(model.info.plural for model in KINDS))
    assert reply.json()["detail"] == f"'pods' is no kflare kind; the webhook serves /validate/<plural> for {plurals}"
    assert (await post(http, "DNSRecord", _valid())).status_code == 404  # the plural, as in the rule's resource


async def test_other_methods_and_paths(http: httpx.AsyncClient) -> None:
    assert (await http.get("/validate/dnsrecords")).status_code == 405
    assert (await http.post("/mutate/dnsrecords", json=_valid())).status_code == 404
    assert (await http.get("/docs")).status_code == 404


async def test_a_declared_huge_body_is_413_before_reading_it(http: httpx.AsyncClient) -> None:
    reply = await post(http, "dnsrecords", b" " * (MAX_BODY + 1))
    assert reply.status_code == 413
    assert reply.json()["detail"] == f"the body is {MAX_BODY + 1} bytes; at most {MAX_BODY} are accepted"


async def test_a_streamed_huge_body_is_413_once_past_the_limit(http: httpx.AsyncClient) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(64):  # 8 MiB, no Content-Length
            sent += 1
            yield b"x" * (128 * 1024)

    reply = await http.post("/validate/dnsrecords", content=chunks())
    assert reply.status_code == 413
    assert sent < 64  # stopped reading, did not buffer the rest


async def test_a_body_just_under_the_limit_is_parsed(http: httpx.AsyncClient) -> None:
    sent = _valid()
    base = len(json.dumps(sent).encode())
    sent["request"]["object"]["spec"]["data"] = {"pad": "x" * (MAX_BODY - base - 64)}
    body = json.dumps(sent).encode()
    assert MAX_BODY - 100 < len(body) <= MAX_BODY
    response = answer(await post(http, "dnsrecords", body), sent)
    assert response["allowed"] is False  # an A record takes content, not data
    assert response["status"]["message"].startswith("spec.data: a A record takes content, not data")


async def test_many_unknown_fields_make_a_bounded_message(http: httpx.AsyncClient) -> None:
    obj = sample("DNSRecord", **{f"f{i}" + "x" * 1000: i for i in range(2000)})
    sent = review("CREATE", obj)
    response = answer(await post(http, "dnsrecords", sent), sent)
    message = response["status"]["message"]
    assert message.endswith("; and 1980 more")
    assert len(message) < 10_000


async def test_a_body_that_stalls_is_408() -> None:
    app = create_app(body_timeout=0.2)
    stalled = asyncio.Event()

    async def chunks() -> AsyncGenerator[bytes, None]:
        yield b'{"apiVersion": '
        await stalled.wait()  # never set: the sender stops sending
        yield b"}"

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://webhook") as client:
        stream = chunks()
        try:
            stalling = asyncio.create_task(client.post("/validate/dnsrecords", content=stream))
            # One timer watches every read: a review that arrives meanwhile is answered, its own deadline unharmed.
            meanwhile = _valid()
            assert answer(await post(client, "dnsrecords", meanwhile), meanwhile)["allowed"] is True
            reply = await asyncio.wait_for(stalling, 10)
        finally:
            await stream.aclose()
        assert reply.status_code == 408
        assert reply.json()["detail"] == "the body did not arrive within 0.2s"
        later = _valid()  # the timer stopped with nothing to watch, and starts again for the next read
        assert answer(await post(client, "dnsrecords", later), later)["allowed"] is True


async def test_an_unexpected_error_is_a_denial_not_a_500(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webhooks.app

    def broken(*_: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(webhooks.app, "decide", broken)
    sent = _valid()
    response = answer(await post(http, "dnsrecords", sent), sent)
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert response["status"]["message"] == "internal error while validating: RuntimeError"


@pytest.mark.parametrize(
    "request_part",
    [
        {"object": {"spec": {"zoneRef": "z", "name": ["x"], "type": {"a": 1}}}},
        {"object": {"spec": {"zoneRef": {"name": {"deep": [1, 2, {"x": None}]}}}}},
        {"object": {"apiVersion": 5, "kind": [], "metadata": "m", "spec": {}}},
        {"object": {"spec": {"ttl": 1e308, "priority": -(2**70), "tags": [None, 1, {"a": "b"}] * 30}}},
        {"object": {"spec": {"name": "a" * 100_000, "comment": "\n" * 1000, "data": {"x": [[[[]]]]}}}},
        {"object": {"spec": {"\u0000": 1, "\ud83d\ude00": 2, "\ud800": 3, "": 4}}},
        {"operation": "UPDATE", "object": {"spec": {}}, "oldObject": {"spec": {"type": [1]}}},
        {"operation": "UPDATE", "object": {"spec": {"type": "A"}}, "oldObject": {"spec": None}},
        {"operation": "UPDATE", "object": {"spec": None}, "oldObject": {}},
        {"operation": "create", "subResource": None, "name": None, "namespace": None},
        {"kind": {"group": "kflare.dev", "version": "v1alpha1", "kind": "DNSRecord", "extra": [1]}, "dryRun": None},
    ],
)
async def test_hostile_requests_never_5xx(http: httpx.AsyncClient, request_part: dict[str, Any]) -> None:
    sent = _valid()
    sent["request"].update(request_part)
    reply = await post(http, "dnsrecords", json.dumps(sent).encode())  # ASCII, with escapes for the odd characters
    assert reply.status_code < 500, reply.text
    if reply.status_code == 200:
        assert answer(reply, sent)["uid"] == sent["request"]["uid"]
        status = reply.json()["response"].get("status")
        assert status is None or status["code"] in (400, 422)


def test_every_sample_kind_is_a_kind() -> None:
    assert set(SAMPLES) == {m.info.kind for m in KINDS}


async def test_reviews_are_answered_while_clients_stall_mid_body() -> None:
    """Clients that send part of a body and stop (more of them than reviews are decided at once) hold no turn: the
    API server's reviews are read, decided and answered meanwhile."""
    app = create_app(max_in_flight=2, body_timeout=30)
    release = asyncio.Event()
    sent: list[int] = []

    async def stalls() -> AsyncGenerator[bytes, None]:
        yield b'{"apiVersion": '
        sent.append(1)
        await release.wait()
        yield b'"admission.k8s.io/v1"}'

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://webhook") as client:
        streams = [stalls() for _ in range(6)]
        stalled = [asyncio.create_task(client.post("/validate/dnsrecords", content=s)) for s in streams]

        async def all_stalled() -> bool:
            return len(sent) == len(streams)

        await eventually(all_stalled, timeout=10, what="every stalling client to have sent part of its body")
        for _ in range(3):
            body = _valid()
            reply = await asyncio.wait_for(post(client, "dnsrecords", body), 5)
            assert answer(reply, body)["allowed"] is True
        release.set()
        for task in stalled:
            assert (await asyncio.wait_for(task, 10)).status_code == 400  # read in the end, and answered
        for stream in streams:
            await stream.aclose()


async def test_bodies_past_the_byte_bound_get_503_until_the_bytes_are_given_back() -> None:
    """What bodies being read may hold is bounded (reviews decided at once, times the largest body): a client
    sending a large body slowly holds its share, and a review that would pass the bound is refused, not queued."""
    app = create_app(max_in_flight=1, max_body=4096, body_timeout=30)
    reading, release = asyncio.Event(), asyncio.Event()

    async def large() -> AsyncGenerator[bytes, None]:
        yield b'{"apiVersion": "' + b"x" * 3900
        reading.set()
        await release.wait()
        yield b'"}'

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://webhook") as client:
        stream = large()
        first = asyncio.create_task(client.post("/validate/dnsrecords", content=stream))
        await asyncio.wait_for(reading.wait(), 10)
        second = await post(client, "dnsrecords", _valid())
        assert second.status_code == 503
        assert second.json()["detail"] == "too many reviews at once; try again"
        assert second.headers["retry-after"] == "1"
        release.set()
        reply = await asyncio.wait_for(first, 10)
        await stream.aclose()
        assert reply.status_code == 400  # read in the end, and answered
        third = _valid()
        assert answer(await post(client, "dnsrecords", third), third)["allowed"] is True  # the bytes were given back


async def test_a_client_that_goes_away_mid_body_ends_quietly(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app()
    sent: list[dict[str, Any]] = []
    messages = iter(
        [
            {"type": "http.request", "body": b'{"apiVersion": ', "more_body": True},
            {"type": "http.disconnect"},
        ]
    )

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": "/validate/dnsrecords",
        "raw_path": b"/validate/dnsrecords",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
        "server": ("127.0.0.1", 9443),
        "client": ("127.0.0.1", 50000),
    }
    with caplog.at_level("DEBUG"):
        await app(scope, receive, send)  # raises nothing
    assert sent[0]["status"] == 400
    assert not [r for r in caplog.records if r.levelno >= 30 or r.exc_info]


async def test_an_object_nested_past_the_parsers_depth_is_denied_naming_its_field() -> None:
    """The API server stores objects nested far deeper than the webhook parses into fields that keep unknown
    content; their review is answered with a denial naming the field, not refused (which the API server reports
    as a failed webhook call)."""

    record = sample("DNSRecord", type="SRV", content=None, proxied=None)
    nested: Any = 1
    for _ in range(300):
        nested = {"a": [nested]}
    record["spec"]["data"] = {"priority": 1, "weight": 1, "port": 1, "target": "x.example.com", "flags": nested}
    body = review("CREATE", record, kind="DNSRecord")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app()), base_url="http://w") as http:
        reply = await http.post("/validate/dnsrecords", content=json.dumps(body))
    assert reply.status_code == 200, reply.text
    response = reply.json()["response"]
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is False
    assert response["status"]["message"] == "spec.data.flags: nested more than 128 levels deep"


async def test_every_review_is_counted_with_its_status_as_the_listener_serves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A review is answered before FastAPI's middleware (`WebhookApp`), the metrics' included: it still counts,
    under the route's template, whatever its answer, an error that escapes as the 500 the client gets."""
    from app.kube.metrics import REGISTRY
    from app.metrics.collectors import instrument

    listener = "webhook-counted"
    app = instrument(create_app(), listener)

    def count(status: int) -> float:
        labels = {"listener": listener, "method": "POST", "status": str(status), "handler": "/validate/{plural}"}
        return REGISTRY.get_sample_value("kflare_http_requests_total", labels) or 0.0

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="https://webhook") as client:
        sent = _valid()
        assert answer(await post(client, "dnsrecords", sent), sent)["allowed"] is True
        assert (await post(client, "dnsrecords", b"{")).status_code == 400
        assert (await post(client, "pods", _valid())).status_code == 404  # through FastAPI and its instrumentation
        import webhooks.app

        def broken(*_: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(webhooks.app, "parse_review", broken)
        assert (await post(client, "dnsrecords", _valid())).status_code == 500
    assert (count(200), count(400), count(404), count(500)) == (1, 1, 1, 1)
    seconds = REGISTRY.get_sample_value(
        "kflare_http_request_duration_seconds_count",
        {"listener": listener, "method": "POST", "handler": "/validate/{plural}"},
    )
    assert seconds == 4
