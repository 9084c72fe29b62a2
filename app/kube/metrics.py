"""The runtime's Prometheus series, under controller-runtime's names so existing dashboards and alerts work."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    registry=REGISTRY,
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_TIMEOUTS = Counter(
    "controller_runtime_reconcile_timeouts_total",
    "Total number of reconciliation timeouts per controller",
    ["controller"],
    registry=REGISTRY,
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)
MAX_CONCURRENT = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
WORKQUEUE_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name", "controller"], registry=REGISTRY)
WORKQUEUE_ADDS = Counter(
    "workqueue_adds_total", "Total number of adds handled by workqueue", ["name", "controller"], registry=REGISTRY
)
WORKQUEUE_RETRIES = Counter(
    "workqueue_retries_total",
    "Total number of retries handled by workqueue",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=(1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, 1000),
    registry=REGISTRY,
)
WORKQUEUE_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name", "controller"],
    buckets=(1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100, 1000),
    registry=REGISTRY,
)
WORKQUEUE_UNFINISHED = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress",
    ["name", "controller"],
    registry=REGISTRY,
)
WORKQUEUE_LONGEST = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running",
    ["name", "controller"],
    registry=REGISTRY,
)
LEADER = Gauge("leader_election_master_status", "1 while this process leads", ["name"], registry=REGISTRY)

KUBERNETES_WRITES = Counter(
    "kflare_kubernetes_writes_total",
    "Writes the controller sent to the Kubernetes API, by resource, subresource (empty for the object itself) and verb",
    ["resource", "subresource", "verb"],
    registry=REGISTRY,
)
