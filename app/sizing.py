"""What the controller's pod should request, from how many kflare resources it manages: `kflare sizing`.

Pure arithmetic over figures measured with the converge benchmark on a 2-core machine, on 2026-12-06, twice (other work
shared the machine; each figure is the lower of the two runs):

    .venv/bin/python bench/converge.py --scales 1000:5,5000:25,20000:100 --drift 60 --outage 0 --secrets-mib 0 \\
        --settle 30 --no-baseline

It converges DNSRecords (and their Zones) against the Cloudflare emulator and a real API server, with `kflare run` as
its own process, and prints for each scale the process' RSS once every resource is Ready and it has idled
`--settle` seconds, its peak RSS (VmHWM) while converging and after a restart, its CPU seconds from the apply to all
Ready, its CPU while idle (drift checks off) and its CPU per reconcile of a drift round. `MEASURED` holds them.

The model:

- memory request: the RSS of a settled process with every resource Ready, on a line whose slope is that between the
  smallest and the largest measured scale (what the benchmark prints as `RSS per resource ... slope from 1,005 to
  20,100`) and which passes through the highest of the measured figures above it (`_envelope`): its intercept is
  above the idle process', as the first reconciles load code and clients the idle process has not; rounded up to
  `REQUEST_STEP_MIB`;
- memory limit: `HEADROOM` times the peak, on the same kind of line through the peaks, rounded up to
  `LIMIT_STEP_MIB`; the headroom covers what the benchmark does not make: bursts of large admission reviews, a
  busier API server (the busier of the two runs measured up to 14 % more), and the Secrets and Worker scripts the
  leader caches (their size adds to both figures);
- CPU request: `CPU_FLOOR_MILLICORES`, or the idle CPU plus the drift checks' CPU (every resource checked once per
  interval) where that is more; the limit stays one core, all one Python process can use;
- the Gateway class (`--gateway-enabled`) adds the gRPC and xDS modules it imports: the resident memory that
  `bench/gateway.py` prints for them ("grpcio + xds-protos, imported after the rest of the process", its
  `DependencyCost`, best of 3, the same day). Every other kind counts as one resource, as a DNSRecord does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Final


@dataclass(frozen=True)
class Measured:
    """One scale of the converge benchmark: resources (records and zones) and what the process took."""

    resources: int
    ready_mib: float
    """RSS with every resource Ready, idle (`controller RSS, N resources Ready`)."""
    peak_mib: float
    """The higher of the peak RSS while converging and after a restart (`peak RSS ...`, VmHWM)."""
    converge_cpu_s: float
    """CPU seconds from the apply of this scale's new resources to all Ready (`CPU to converge`)."""
    new_resources: int
    """The resources that apply added (the benchmark's scales are cumulative)."""
    idle_millicores: float
    """CPU while idle, drift checks off (`idle CPU`)."""


IDLE_MIB: Final = 81.0
"""RSS of a settled process with no resources (`controller RSS, no resources`)."""
MEASURED: Final = (
    Measured(1_005, 95.1, 105.8, 4.8, 1_005, 0.3),
    Measured(5_025, 116.1, 121.2, 23.6, 4_020, 0.7),
    Measured(20_100, 209.5, 209.4, 89.8, 15_075, 1.3),
)
RECONCILE_CPU_MS: Final = 0.34
"""CPU of one idle reconcile in a drift round (`CPU per idle reconcile`), the highest of the scales."""
GATEWAY_CLASS_MIB: Final = 13.2
"""What the Gateway class's gRPC and xDS modules add to the process (`bench/gateway.py`)."""

HEADROOM: Final = 2.0
REQUEST_STEP_MIB: Final = 32
LIMIT_STEP_MIB: Final = 64
CPU_FLOOR_MILLICORES: Final = 100
CPU_LIMIT: Final = "1"
CHART_DEFAULT_RESOURCES: Final = 1_000
"""The count the chart's default `resources` are sized for (`kflare sizing --resources 1000`)."""


def _envelope(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Intercept and slope (per resource) of the line with the slope between the smallest and the largest scale of
    `points` that passes through the highest of them above it: on or above every point."""
    (n1, m1), *_, (n2, m2) = sorted(points)
    slope = (m2 - m1) / (n2 - n1)
    return max(m - slope * n for n, m in points), slope


READY_BASE_MIB, READY_MIB_PER_RESOURCE = _envelope([(m.resources, m.ready_mib) for m in MEASURED])
PEAK_BASE_MIB, PEAK_MIB_PER_RESOURCE = _envelope([(m.resources, m.peak_mib) for m in MEASURED])
CONVERGE_CPU_MS: Final = max(1000 * m.converge_cpu_s / m.new_resources for m in MEASURED)
"""CPU milliseconds to converge one new resource, the highest of the scales."""
IDLE_BASE_MILLICORES, IDLE_MILLICORES_PER_RESOURCE = _envelope([(m.resources, m.idle_millicores) for m in MEASURED])


@dataclass(frozen=True)
class Counts:
    """What a user says the installation manages. `other` counts resources of any other kind."""

    records: int = 0
    zones: int = 0
    workers: int = 0
    gateways: int = 0
    routes: int = 0
    other: int = 0

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 0:
                raise ValueError(f"{name} must be 0 or more, got {value}")

    @property
    def resources(self) -> int:
        return self.records + self.zones + self.workers + self.gateways + self.routes + self.other

    @property
    def gateway_class(self) -> bool:
        """Whether the Gateway class runs (a Gateway or a route of it is counted)."""
        return self.gateways > 0 or self.routes > 0


@dataclass(frozen=True)
class Recommendation:
    counts: Counts
    ready_mib: float
    peak_mib: float
    memory_request_mib: int
    memory_limit_mib: int
    cpu_request_millicores: int
    converge_cpu_s: float

    def values(self) -> dict[str, dict[str, str]]:
        """The chart's `resources` value."""
        return {
            "requests": {"cpu": f"{self.cpu_request_millicores}m", "memory": f"{self.memory_request_mib}Mi"},
            "limits": {"cpu": CPU_LIMIT, "memory": f"{self.memory_limit_mib}Mi"},
        }

    def helm_flags(self) -> list[str]:
        """`--set` flags of `helm install` / `helm upgrade` that give the chart these resources."""
        return [
            f"--set resources.{section}.{name}={value}"
            for section, values in self.values().items()
            for name, value in values.items()
        ]

    def render(self) -> str:
        c = self.counts
        kinds = [("records", c.records), ("zones", c.zones), ("workers", c.workers), ("gateways", c.gateways)]
        kinds += [("routes", c.routes), ("others", c.other)]
        counted = ", ".join(f"{value:,} {name}" for name, value in kinds if value) if c.other < c.resources else ""
        values = self.values()
        lines = [
            f"kflare resources: {c.resources:,}" + (f" ({counted})" if counted else ""),
            f"  expected RSS: {self.ready_mib:.0f} MiB with every resource Ready, {self.peak_mib:.0f} MiB at peak"
            + (" (Gateway class included)" if c.gateway_class else ""),
            f"  converging them all: about {self.converge_cpu_s:.0f} CPU seconds (one core at most)",
            f"  requests: cpu {values['requests']['cpu']}, memory {values['requests']['memory']}",
            f"  limits:   cpu {values['limits']['cpu']}, memory {values['limits']['memory']}",
            "  add the size of the Secrets and Worker scripts kflare reads to both memory figures",
            "",
            "helm flags (add them to helm install or helm upgrade):",
            "  " + " ".join(self.helm_flags()),
        ]
        return "\n".join(lines)


def _round_up(mib: float, step: int) -> int:
    return max(step, math.ceil(mib / step) * step)


def recommend(counts: Counts, drift_check_interval: timedelta | None = None) -> Recommendation:
    """Requests and limits for `counts`; `drift_check_interval` (None or 0: off, the chart's default) adds the CPU
    of checking every resource once per interval."""
    n = counts.resources
    extra = GATEWAY_CLASS_MIB if counts.gateway_class else 0.0
    ready = max(IDLE_MIB, READY_BASE_MIB + READY_MIB_PER_RESOURCE * n) + extra
    peak = max(ready, PEAK_BASE_MIB + PEAK_MIB_PER_RESOURCE * n + extra)
    millicores = max(0.0, IDLE_BASE_MILLICORES + IDLE_MILLICORES_PER_RESOURCE * n)
    if drift_check_interval and drift_check_interval > timedelta(0):
        millicores += n * RECONCILE_CPU_MS / drift_check_interval.total_seconds()
    return Recommendation(
        counts=counts,
        ready_mib=ready,
        peak_mib=peak,
        memory_request_mib=_round_up(ready, REQUEST_STEP_MIB),
        memory_limit_mib=_round_up(HEADROOM * peak, LIMIT_STEP_MIB),
        cpu_request_millicores=max(CPU_FLOOR_MILLICORES, math.ceil(millicores / 10) * 10),
        converge_cpu_s=n * CONVERGE_CPU_MS / 1000,
    )
