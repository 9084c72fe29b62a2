"""What a scrape of `/metrics` returns, all from one registry (`app.kube.metrics.REGISTRY`):

- the controller runtime's series under controller-runtime's names (`controller_runtime_reconcile_total`,
  `workqueue_depth`, ...), kept by `app.kube`;
- the process' own (`process_*`, `python_gc_*`, `python_info`), from prometheus_client's collectors;
- the listeners' HTTP requests (`kflare_http_requests_total`, `kflare_http_request_duration_seconds`, labelled by
  listener), recorded by prometheus-fastapi-instrumentator on every app `instrument()` is applied to;
- the Cloudflare client's use of each token's call budget (`kflare_cloudflare_*`), read from
  `CloudflareSession.budget_stats()` at scrape time by `CloudflareCollector`. A token is named by its fingerprint;
- `kflare_resources{kind, ready, reason}`: how many kflare resources the leader's informer caches hold, by the
  status and reason of their Ready condition, counted at scrape time by `ResourceCollector` (a standby caches none,
  so it exports no samples and a sum over the pods counts each resource once);
- `kflare_asyncio_tasks`, counted at scrape time by `TaskCollector`.
"""

from __future__ import annotations

import asyncio
import collections
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol, runtime_checkable

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_fastapi_instrumentator import Instrumentator
from prometheus_fastapi_instrumentator.metrics import Info

from app.cloudflare.budget import BudgetStats
from app.kube.metrics import REGISTRY


def _install_process_collectors(registry: CollectorRegistry) -> None:
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


_install_process_collectors(REGISTRY)  # once per process: a module runs once

HTTP_REQUESTS = Counter(
    "kflare_http_requests_total",
    "HTTP requests served, by listener, method, status code and route",
    ["listener", "method", "status", "handler"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "kflare_http_request_duration_seconds",
    "Time to serve an HTTP request, by listener, method and route",
    ["listener", "method", "handler"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


RequestRecorder = Callable[[str, str, str, float], None]
"""Records one request: its method, status code, route template ("none" for any other path) and seconds."""


@runtime_checkable
class AnswersDirectly(Protocol):
    """An app that answers some requests before its middleware, the instrumentator's included, and tells
    `observe_direct`'s observers of each (`webhooks.app.WebhookApp`)."""

    def observe_direct(self, observer: RequestRecorder) -> None: ...


def _recorder(listener: str) -> RequestRecorder:
    # Each series' child is looked up once: resolving labels costs as much as recording. The keys are bounded as
    # the series are: known methods, status codes, route templates (any other path is "none").
    series: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}

    def record(method: str, status: str, handler: str, seconds: float) -> None:
        # A client picks the method: anything unusual shares one label value, so it cannot grow the series.
        method = method if method in _METHODS else "other"
        key = (method, status, handler)
        children = series.get(key)
        if children is None:
            children = series[key] = (
                HTTP_REQUESTS.labels(listener, *key),
                HTTP_DURATION.labels(listener, method, handler),
            )
        children[0].inc()
        children[1].observe(seconds)

    return record


def instrument(app: FastAPI, listener: str) -> FastAPI:
    """Record `app`'s requests in `kflare_http_*{listener=...}`; requests to unknown paths share `handler="none"`.
    Call it once per app, after the app's own middleware, so that refused requests count too."""
    instrumentator = Instrumentator(
        should_group_status_codes=False,
        should_group_untemplated=True,
        registry=REGISTRY,
    )
    record = _recorder(listener)

    def record_info(info: Info) -> None:
        record(info.method, info.modified_status, info.modified_handler, info.modified_duration)

    # With an instrumentation of our own the instrumentator registers none of its default series, which it would
    # try to register again for every app.
    instrumentator.add(record_info).instrument(app)
    if isinstance(app, AnswersDirectly):
        app.observe_direct(record)
    return app


class CloudflareCollector(Collector):
    """The Cloudflare client's per-token budgets as Prometheus series, read from `source` at each scrape."""

    def __init__(self, source: Callable[[], Iterable[BudgetStats]]) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []  # series come and go with tokens: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        stats = list(self._source())
        token = ["token"]
        calls = CounterMetricFamily(
            "kflare_cloudflare_calls",
            "Cloudflare API calls answered or failed, by outcome",
            labels=["token", "outcome"],
        )
        limited = CounterMetricFamily(
            "kflare_cloudflare_rate_limited", "Cloudflare API calls answered 429 (rate limited)", labels=token
        )
        waited = CounterMetricFamily(
            "kflare_cloudflare_budget_wait_seconds",
            "Seconds callers spent waiting for the token's call budget",
            labels=token,
        )
        refused = CounterMetricFamily(
            "kflare_cloudflare_budget_refused",
            "Calls failed without being sent because the budget's wait would be too long",
            labels=token,
        )
        pauses = CounterMetricFamily(
            "kflare_cloudflare_budget_pauses", "Pauses of every call of the token ordered by Cloudflare", labels=token
        )
        remaining = GaugeMetricFamily(
            "kflare_cloudflare_budget_remaining", "Calls that could be sent now without waiting", labels=token
        )
        capacity = GaugeMetricFamily(
            "kflare_cloudflare_budget_capacity", "Calls the budget allows per window", labels=token
        )
        window = GaugeMetricFamily(
            "kflare_cloudflare_budget_window_seconds", "Length of the budget's sliding window", labels=token
        )
        in_flight = GaugeMetricFamily(
            "kflare_cloudflare_calls_in_flight", "Calls sent and not answered yet", labels=token
        )
        waiting = GaugeMetricFamily(
            "kflare_cloudflare_budget_waiting", "Callers waiting for the token's budget now", labels=token
        )
        paused = GaugeMetricFamily(
            "kflare_cloudflare_budget_paused_seconds", "Seconds left of a pause Cloudflare ordered", labels=token
        )
        server_remaining = GaugeMetricFamily(
            "kflare_cloudflare_server_remaining", "Calls left in Cloudflare's own window, as it last said", labels=token
        )
        for s in stats:
            for outcome, count in sorted(s.calls.items()):
                calls.add_metric([s.token, outcome], count)
            limited.add_metric([s.token], s.calls.get("rate_limited", 0))
            waited.add_metric([s.token], s.waited_seconds)
            refused.add_metric([s.token], s.refused)
            pauses.add_metric([s.token], s.pauses)
            remaining.add_metric([s.token], s.remaining)
            capacity.add_metric([s.token], s.capacity)
            window.add_metric([s.token], s.window)
            in_flight.add_metric([s.token], s.in_flight)
            waiting.add_metric([s.token], s.waiting)
            paused.add_metric([s.token], s.paused_for)
            if s.server_remaining is not None:
                server_remaining.add_metric([s.token], s.server_remaining)
        yield from (calls, limited, waited, refused, pauses, remaining, capacity, window, in_flight, waiting, paused)
        yield server_remaining


ResourceSource = Callable[[], Iterable[tuple[str, Iterable[Mapping[str, object]]]]]
"""Each kind with the objects of that kind the controller holds."""

_REASON = re.compile(r"[A-Z][A-Za-z0-9]{0,63}")


def ready_of(obj: Mapping[str, object]) -> tuple[str, str]:
    """(status, reason) of an object's Ready condition: ("Unknown", "") before its first reconcile. Reasons are
    the controller's own CamelCase words; anything else shares "Other", so the label cannot grow without bound."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            value = cond.get("status")
            reason = cond.get("reason")
            ready = value if isinstance(value, str) and value in ("True", "False") else "Unknown"
            if not isinstance(reason, str) or not reason:
                return ready, ""
            return ready, reason if _REASON.fullmatch(reason) else "Other"
    return "Unknown", ""


class ResourceCollector(Collector):
    """`kflare_resources{kind, ready, reason}`: resources counted by their Ready condition at each scrape, from
    what the controller already holds (its informer caches), so alerting on resources that are not Ready needs no
    kube-state-metrics configuration. A few dozen series at most: kinds times the reasons each can report."""

    def __init__(self, source: ResourceSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kflare_resources",
            "kflare resources the controller manages, by kind and by the status and reason of their Ready condition",
            labels=["kind", "ready", "reason"],
        )
        for kind, objects in self._source():
            counts = collections.Counter(ready_of(obj) for obj in objects)
            for (ready, reason), count in sorted(counts.items()):
                family.add_metric([kind, ready, reason], count)
        yield family


class TaskCollector(Collector):
    """`kflare_asyncio_tasks`: the event loop's tasks at each scrape. Watches, timers and connections each hold a
    task, so a count that grows with time (and not with resources) is a leak."""

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        try:
            tasks = asyncio.all_tasks()
        except RuntimeError:  # scraped outside the event loop (a registry read by hand): nothing to count
            return
        yield GaugeMetricFamily("kflare_asyncio_tasks", "asyncio tasks of the process' event loop", value=len(tasks))


class Exposition(Collector):
    """Several collectors as one, for one scrape: the process' registry plus collectors owned by one runtime."""

    def __init__(self, *collectors: Collector) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


__all__ = [
    "HTTP_DURATION",
    "HTTP_REQUESTS",
    "CloudflareCollector",
    "Exposition",
    "ResourceCollector",
    "ResourceSource",
    "TaskCollector",
    "instrument",
    "ready_of",
]
