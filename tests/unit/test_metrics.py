"""The metrics listener: what a scrape returns, and who may scrape (with a stand-in for the API server's reviews)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.cloudflare.budget import BudgetConfig, BudgetRegistry, BudgetStats
from app.cloudflare.errors import OUTCOMES
from app.kube.client import KubeError
from app.kube.metrics import RECONCILE_TOTAL, REGISTRY
from app.metrics.authz import (
    ACCESS_REVIEWS,
    ALLOWED_TTL,
    DENIED_TTL,
    TOKEN_REVIEWS,
    Authorizer,
    KubeReviewer,
    ReviewUnavailable,
    UserInfo,
    bearer_token,
)
from app.metrics.collectors import CloudflareCollector, instrument
from app.metrics.listener import create_app, listener
from app.server import Runtime, probes_app
from app.settings import Settings
from app.tls import TLSError, self_signed

TOKEN = "eyJhbGciOiJSUzI1NiJ9.a-service-account-token.signature"
OTHER = "eyJhbGciOiJSUzI1NiJ9.another-token.signature"
ALICE = UserInfo("system:serviceaccount:monitoring:prometheus", uid="u-1", groups=("system:serviceaccounts",))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeReviewer:
    """Users by token and the paths each may get; `down` makes every review fail like an unreachable server."""

    users: dict[str, UserInfo] = field(default_factory=dict)
    grants: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    down: bool = False
    authentications: int = 0
    authorizations: list[tuple[str, str, str]] = field(default_factory=list)
    gate: asyncio.Event | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)

    async def authenticate(self, token: str) -> UserInfo | None:
        self.authentications += 1
        self.asked.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise ReviewUnavailable("connection refused")
        return self.users.get(token)

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        self.authorizations.append((user.username, verb, path))
        return (verb, path) in self.grants.get(user.username, set())


def reviewer_with_alice(*, allowed: bool = True) -> FakeReviewer:
    grants = {ALICE.username: {("get", "/metrics")}} if allowed else {}
    return FakeReviewer(users={TOKEN: ALICE}, grants=grants)


# -- the decision ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("Basic dXNlcjpwYXNz", None),
        (f"Bearer {TOKEN}", TOKEN),
        (f"bearer {TOKEN}", TOKEN),
        (f"  Bearer  {TOKEN}  ", TOKEN),
        ("Bearer " + "x" * 20000, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


async def test_no_token_is_401_without_asking_the_api_server() -> None:
    reviewer = reviewer_with_alice()
    authorizer = Authorizer(reviewer)
    for header in (None, "Basic abc", "Bearer "):
        verdict = await authorizer.check(header, "get", "/metrics")
        assert verdict.status == 401
    assert reviewer.authentications == 0


async def test_a_token_the_api_server_rejects_is_401() -> None:
    reviewer = reviewer_with_alice()
    verdict = await Authorizer(reviewer).check("Bearer garbage", "get", "/metrics")
    assert verdict.status == 401
    assert reviewer.authorizations == []


async def test_a_user_without_the_permission_is_403() -> None:
    reviewer = reviewer_with_alice(allowed=False)
    verdict = await Authorizer(reviewer).check(f"Bearer {TOKEN}", "get", "/metrics")
    assert verdict.status == 403
    assert verdict.user == ALICE.username
    assert reviewer.authorizations == [(ALICE.username, "get", "/metrics")]


async def test_an_allowed_user_passes_for_the_path_and_verb_granted_only() -> None:
    reviewer = reviewer_with_alice()
    authorizer = Authorizer(reviewer)
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")).status == 200
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/other")).status == 403
    assert (await authorizer.check(f"Bearer {TOKEN}", "post", "/metrics")).status == 403


async def test_api_server_unavailable_is_503_and_not_cached() -> None:
    reviewer = reviewer_with_alice()
    reviewer.down = True
    authorizer = Authorizer(reviewer)
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")).status == 503
    assert len(authorizer) == 0
    reviewer.down = False
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")).status == 200
    assert reviewer.authentications == 2


async def test_an_allowed_token_is_trusted_for_a_minute() -> None:
    clock, reviewer = Clock(), reviewer_with_alice()
    authorizer = Authorizer(reviewer, clock=clock)
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")).allowed
    reviewer.grants.clear()  # revoked: the cache does not know yet
    clock.now += ALLOWED_TTL - 0.5
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")).allowed
    assert reviewer.authentications == 1
    clock.now += 0.5
    assert (await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")).status == 403
    assert reviewer.authentications == 2


@pytest.mark.parametrize("allowed", [False, True], ids=["forbidden", "unauthenticated"])
async def test_a_refused_token_is_refused_from_the_cache_only_briefly(allowed: bool) -> None:
    clock, reviewer = Clock(), reviewer_with_alice(allowed=allowed)
    token = "unknown" if allowed else TOKEN  # the first case: a token nobody has, so 401
    authorizer = Authorizer(reviewer, clock=clock)
    first = await authorizer.check(f"Bearer {token}", "get", "/metrics")
    assert first.status in (401, 403)
    clock.now += DENIED_TTL - 0.5
    assert (await authorizer.check(f"Bearer {token}", "get", "/metrics")).status == first.status
    assert reviewer.authentications == 1
    clock.now += 0.5
    await authorizer.check(f"Bearer {token}", "get", "/metrics")
    assert reviewer.authentications == 2
    assert DENIED_TTL < ALLOWED_TTL


async def test_the_cache_is_bounded_and_keeps_the_recently_used() -> None:
    reviewer = FakeReviewer(
        users={f"token-{i}": UserInfo(f"user-{i}") for i in range(5)},
        grants={f"user-{i}": {("get", "/metrics")} for i in range(5)},
    )
    authorizer = Authorizer(reviewer, max_entries=3)
    for i in range(3):
        await authorizer.check(f"Bearer token-{i}", "get", "/metrics")
    await authorizer.check("Bearer token-0", "get", "/metrics")  # recently used again
    await authorizer.check("Bearer token-3", "get", "/metrics")  # evicts token-1, the least recently used
    assert len(authorizer) == 3
    assert reviewer.authentications == 4
    await authorizer.check("Bearer token-0", "get", "/metrics")
    assert reviewer.authentications == 4
    await authorizer.check("Bearer token-1", "get", "/metrics")
    assert reviewer.authentications == 5


async def test_the_cache_holds_no_token() -> None:
    authorizer = Authorizer(reviewer_with_alice())
    await authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")
    held = repr(authorizer._cache) + repr(authorizer._pending)
    assert TOKEN not in held
    assert TOKEN.encode().hex() not in held


async def test_concurrent_requests_with_one_token_share_one_review() -> None:
    reviewer = reviewer_with_alice()
    reviewer.gate = asyncio.Event()
    authorizer = Authorizer(reviewer)
    checks = [asyncio.create_task(authorizer.check(f"Bearer {TOKEN}", "get", "/metrics")) for _ in range(5)]
    await reviewer.asked.wait()
    reviewer.gate.set()
    verdicts = await asyncio.gather(*checks)
    assert [v.status for v in verdicts] == [200] * 5
    assert reviewer.authentications == 1
    assert authorizer.reviews == 1


async def test_a_caller_that_goes_away_does_not_cancel_the_review_others_wait_for() -> None:
    reviewer = reviewer_with_alice()
    reviewer.gate = asyncio.Event()
    authorizer = Authorizer(reviewer)
    leaving = asyncio.create_task(authorizer.check(f"Bearer {TOKEN}", "get", "/metrics"))
    staying = asyncio.create_task(authorizer.check(f"Bearer {TOKEN}", "get", "/metrics"))
    await reviewer.asked.wait()
    leaving.cancel()
    reviewer.gate.set()
    assert (await staying).status == 200
    with pytest.raises(asyncio.CancelledError):
        await leaving


# -- the reviews against the API server --------------------------------------------------------------------------


class FakeKube:
    """Answers `request` from `answers` by path; records each call (with its timeout)."""

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, Any, float]] = []

    async def request(
        self, method: str, path: str, *, body: Any = None, timeout: float = 30.0, flow: str | None = ""
    ) -> Any:
        self.calls.append((method, path, body, timeout))
        answer = self.answers[path]
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, asyncio.Event):
            await answer.wait()
            return {}
        return answer


async def test_kube_reviewer_sends_the_user_from_the_token_review_to_the_access_review() -> None:
    kube = FakeKube(
        {
            TOKEN_REVIEWS: {
                "status": {
                    "authenticated": True,
                    "user": {
                        "username": ALICE.username,
                        "uid": "u-1",
                        "groups": ["system:serviceaccounts", "system:authenticated"],
                        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
                    },
                }
            },
            ACCESS_REVIEWS: {"status": {"allowed": True}},
        }
    )
    reviewer = KubeReviewer(lambda: kube, timeout=3.0)  # type: ignore[arg-type,return-value]
    user = await reviewer.authenticate(TOKEN)
    assert user is not None
    assert await reviewer.authorize(user, "get", "/metrics")
    (_, path1, review, timeout1), (_, path2, access, timeout2) = kube.calls
    assert (path1, path2) == (TOKEN_REVIEWS, ACCESS_REVIEWS)
    assert review == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": TOKEN}}
    assert access["kind"] == "SubjectAccessReview"
    assert access["spec"] == {
        "user": ALICE.username,
        "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    assert timeout1 == timeout2 == 3.0


@pytest.mark.parametrize(
    ("status", "expected"),
    [({"allowed": True}, True), ({"allowed": False}, False), ({"allowed": True, "denied": True}, False), ({}, False)],
)
async def test_kube_reviewer_reads_the_access_review(status: dict[str, Any], expected: bool) -> None:
    kube = FakeKube({ACCESS_REVIEWS: {"status": status}})
    assert await KubeReviewer(lambda: kube).authorize(ALICE, "get", "/metrics") is expected  # type: ignore[arg-type,return-value]


async def test_kube_reviewer_passes_audiences_and_reads_a_refusal() -> None:
    kube = FakeKube({TOKEN_REVIEWS: {"status": {"authenticated": False, "error": "invalid bearer token"}}})
    reviewer = KubeReviewer(lambda: kube, audiences=["kflare"])  # type: ignore[arg-type,return-value]
    assert await reviewer.authenticate(TOKEN) is None
    assert kube.calls[0][2]["spec"] == {"token": TOKEN, "audiences": ["kflare"]}


@pytest.mark.parametrize(
    "failure",
    [
        KubeError(403, "Forbidden", "cannot create resource tokenreviews"),
        KubeError(500, "InternalError", "etcd unavailable"),
        KubeError(0, "Unreachable", "ConnectError: connection refused"),
        ConnectionRefusedError(111, "refused"),
        asyncio.Event(),  # never answers: the reviewer's own timeout ends it
    ],
    ids=["forbidden", "server-error", "connection", "refused", "hangs"],
)
async def test_kube_reviewer_turns_failures_into_unavailable(failure: Any) -> None:
    kube = FakeKube({TOKEN_REVIEWS: failure})
    reviewer = KubeReviewer(lambda: kube, timeout=0.05)  # type: ignore[arg-type,return-value]
    with pytest.raises(ReviewUnavailable) as caught:
        await reviewer.authenticate(TOKEN)
    assert TOKEN not in str(caught.value)
    verdict = await Authorizer(reviewer).check(f"Bearer {TOKEN}", "get", "/metrics")
    assert verdict.status == 503


async def test_kube_reviewer_before_the_client_connects_is_unavailable() -> None:
    with pytest.raises(ReviewUnavailable):
        await KubeReviewer(lambda: None).authenticate(TOKEN)


# -- the app -----------------------------------------------------------------------------------------------------


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://metrics")


async def test_secure_app_answers_401_403_503_and_200() -> None:
    reviewer = FakeReviewer(
        users={TOKEN: ALICE, OTHER: UserInfo("bob")}, grants={ALICE.username: {("get", "/metrics")}}
    )
    async with client_for(create_app(Authorizer(reviewer))) as http:
        missing = await http.get("/metrics")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert (await http.get("/metrics", headers={"Authorization": "Bearer nope"})).status_code == 401
        assert (await http.get("/metrics", headers={"Authorization": f"Bearer {OTHER}"})).status_code == 403
        allowed = await http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert allowed.status_code == 200
        assert allowed.headers["content-type"].startswith("text/plain")
        assert "# TYPE controller_runtime_reconcile_total counter" in allowed.text
        # Paths other than /metrics are refused before routing, like any path the user may not get.
        assert (await http.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 403
        assert (await http.get("/openapi.json")).status_code == 401
        reviewer.down = True
        unavailable = await http.get("/metrics", headers={"Authorization": f"Bearer {OTHER}x"})
        assert unavailable.status_code == 503
        assert unavailable.headers["retry-after"]
        for refused in (missing, unavailable):
            assert TOKEN not in refused.text


async def test_plain_app_serves_without_a_token() -> None:
    async with client_for(create_app(None)) as http:
        reply = await http.get("/metrics")
        assert reply.status_code == 200
        assert "# HELP workqueue_depth" in reply.text


async def test_openmetrics_on_request() -> None:
    async with client_for(create_app(None)) as http:
        reply = await http.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert reply.headers["content-type"].startswith("application/openmetrics-text")
        assert reply.text.endswith("# EOF\n")


async def test_scrape_has_runtime_process_http_and_cloudflare_series() -> None:
    RECONCILE_TOTAL.labels("zone", "success").inc(0)
    stats = BudgetStats(
        token="0123456789ab",
        capacity=960,
        window=300.0,
        calls={"ok": 7, "rate_limited": 2, "transient": 1},
        waited_seconds=1.5,
        remaining=950,
        in_flight=1,
        waiting=0,
        paused_for=0.0,
        pauses=1,
        refused=0,
        server_remaining=None,
    )
    app = create_app(None, collectors=[CloudflareCollector(lambda: [stats])])
    instrument(probes_app(Runtime(Settings())), "probes")  # another listener on the same registry
    async with client_for(app) as http:
        await http.get("/metrics")
        text = (await http.get("/metrics")).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "controller_runtime_reconcile",
        "controller_runtime_reconcile_errors",
        "controller_runtime_reconcile_time_seconds",
        "workqueue_depth",
        "process_cpu_seconds",
        "process_resident_memory_bytes",
        "python_info",
        "python_gc_collections",
        "kflare_http_requests",
        "kflare_http_request_duration_seconds",
        "kflare_cloudflare_calls",
        "kflare_cloudflare_rate_limited",
        "kflare_cloudflare_budget_wait_seconds",
        "kflare_cloudflare_budget_remaining",
    ):
        assert name in families, name
    assert 'kflare_http_requests_total{handler="/metrics",listener="metrics",method="GET",status="200"}' in text
    assert 'kflare_cloudflare_calls_total{outcome="ok",token="0123456789ab"} 7.0' in text
    assert 'kflare_cloudflare_rate_limited_total{token="0123456789ab"} 2.0' in text
    assert 'kflare_cloudflare_budget_wait_seconds_total{token="0123456789ab"} 1.5' in text
    assert 'kflare_cloudflare_budget_remaining{token="0123456789ab"} 950.0' in text


async def test_http_metrics_of_unknown_paths_and_methods_stay_bounded() -> None:
    async with client_for(create_app(None)) as http:
        for i in range(3):
            await http.get(f"/no/such/path/{i}")
            await http.request(f"WEIRD{i}", "/metrics")
    text = generate_latest(REGISTRY).decode()
    assert "/no/such/path" not in text
    assert "WEIRD" not in text
    assert 'kflare_http_requests_total{handler="none",listener="metrics",method="GET",status="404"}' in text
    assert 'listener="metrics",method="other",status="405"' in text


def test_cloudflare_collector_reads_real_budgets_and_names_tokens_by_fingerprint() -> None:
    budgets = BudgetRegistry(BudgetConfig(share=0.5))
    secret = "a-cloudflare-api-token-value"
    budgets.get("key", name="fp0123456789")
    registry = CollectorRegistry()
    registry.register(CloudflareCollector(budgets.stats))
    text = generate_latest(registry).decode()
    assert secret not in text
    for outcome in OUTCOMES:
        assert f'kflare_cloudflare_calls_total{{outcome="{outcome}",token="fp0123456789"}} 0.0' in text
    assert 'kflare_cloudflare_budget_capacity{token="fp0123456789"} 600.0' in text
    assert 'kflare_cloudflare_budget_remaining{token="fp0123456789"} 600.0' in text
    assert "kflare_cloudflare_server_remaining{" not in text  # not reported yet
    # No tokens yet: the families are there, with no samples.
    empty = CollectorRegistry()
    empty.register(CloudflareCollector(list))
    assert "# TYPE kflare_cloudflare_calls_total counter" in generate_latest(empty).decode()


# -- the listener ------------------------------------------------------------------------------------------------


@dataclass
class View:
    kube: Any = None
    cloudflare: Any = None


def test_listener_secure_by_default_serves_tls_with_a_self_signed_certificate() -> None:
    endpoint = listener(Settings(), View(), "0.0.0.0", 18080)  # noqa: S104
    assert endpoint.tls is not None
    assert endpoint.tls.is_self_signed
    assert (endpoint.config.host, endpoint.config.port) == ("0.0.0.0", 18080)  # noqa: S104


def test_listener_insecure_is_plain_http() -> None:
    endpoint = listener(Settings(metrics_secure=False), View(), "127.0.0.1", 18080)
    assert endpoint.tls is None
    assert endpoint.config.ssl_certfile is None


def test_listener_with_a_certificate_directory_needs_a_usable_pair(tmp_path: Path) -> None:
    with pytest.raises(TLSError):
        listener(Settings(metrics_cert_path=tmp_path), View(), "127.0.0.1", 18080)


def test_listener_serves_the_certificate_of_the_directory(tmp_path: Path) -> None:
    cert, key = self_signed(["kflare-metrics.kflare-system.svc"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    endpoint = listener(Settings(metrics_cert_path=tmp_path), View(), "127.0.0.1", 18080)
    assert endpoint.tls is not None
    assert not endpoint.tls.is_self_signed
    assert endpoint.tls.cert_pem == cert


def _obj(status: str | None = None, reason: str | None = None) -> dict[str, Any]:
    if status is None:
        return {"metadata": {"name": "x"}}
    return {"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}}


def test_resources_are_counted_by_kind_ready_and_reason() -> None:
    """`kflare_resources` is what the "not Ready" alert reads: one series per kind, Ready status and reason, with
    the count; reasons that are not the controller's words share `Other`, so the series stay few."""
    from app.metrics.collectors import ResourceCollector

    objects = {
        "Zone": [_obj("True", "Synced"), _obj("True", "Synced"), _obj("False", "AccountNotReady")],
        "DNSRecord": [_obj(), _obj("False", "not a reason; with spaces"), _obj("Weird", "APIError")],
        "CloudflareAccount": [],
    }
    registry = CollectorRegistry()
    registry.register(ResourceCollector(lambda: objects.items()))
    (family,) = text_string_to_metric_families(generate_latest(registry).decode())
    assert family.name == "kflare_resources"
    assert family.type == "gauge"
    found = {(s.labels["kind"], s.labels["ready"], s.labels["reason"]): s.value for s in family.samples}
    assert found == {
        ("Zone", "True", "Synced"): 2,
        ("Zone", "False", "AccountNotReady"): 1,
        ("DNSRecord", "Unknown", ""): 1,
        ("DNSRecord", "False", "Other"): 1,
        ("DNSRecord", "Unknown", "APIError"): 1,
    }


async def test_the_event_loops_tasks_are_counted() -> None:
    """`kflare_asyncio_tasks` is how a soak sees leaked watches or timers: it counts the loop's tasks, one more
    for each task started."""
    import asyncio

    from app.metrics.collectors import TaskCollector

    registry = CollectorRegistry()
    registry.register(TaskCollector())

    def count() -> float:
        (family,) = text_string_to_metric_families(generate_latest(registry).decode())
        assert family.name == "kflare_asyncio_tasks"
        return float(family.samples[0].value)

    before = count()
    stop = asyncio.Event()
    task = asyncio.create_task(stop.wait())
    assert count() == before + 1
    stop.set()
    await task
    assert count() == before
