"""Every flag of `kflare run`, from the command line or from `KFLARE_*` environment variables.

Flag names follow the Go controller's (`--drift-check-interval`, `--reconcile-timeout`, ...), and durations take its
syntax (`30m`, `1h30m`, `0s`), so a chart's values and a Deployment's args carry over unchanged.
"""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> timedelta:
    """A Go duration (`1h30m`, `90s`, `0s`), a number of seconds, or a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    text = str(value).strip()
    if text in ("", "0"):
        return timedelta(0)
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"invalid duration {value!r}: use a form such as 90s, 30m or 1h30m")
    return timedelta(seconds=total)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class DeletionPolicy(StrEnum):
    DELETE = "delete"
    RETAIN = "retain"


class LogFormat(StrEnum):
    JSON = "json"
    TEXT = "text"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KFLARE_", extra="forbid")

    kubeconfig: Path | None = Field(None, description="kubeconfig file; in a Pod the in-cluster config is used")
    namespace: str = Field(
        "kflare-system", description="namespace of the leader Lease (the chart sets the release namespace)"
    )
    leader_elect: bool = Field(False, description="only the holder of the Lease reconciles")
    lease_name: str = Field(
        # The Go controller's lease: running both against one cluster never makes two leaders.
        "a634e97e.kflare.dev",
        description="name of the leader election Lease",
    )
    lease_duration: Duration = timedelta(seconds=15)
    renew_deadline: Duration = timedelta(seconds=10)
    retry_period: Duration = timedelta(seconds=2)
    drift_check_interval: Duration = Field(
        timedelta(0), description="check each resource against Cloudflare this long after it synced; 0s is off"
    )
    reconcile_timeout: Duration = Field(timedelta(minutes=5), description="bound on one reconcile; 0s is off")
    default_deletion_policy: DeletionPolicy = DeletionPolicy.DELETE
    resync_period: Duration = Field(timedelta(hours=10), description="re-reconcile everything this often")
    dns_batch_size: int = Field(
        0,
        ge=0,
        description="DNS writes of one zone sent per call; 0 is the zone plan's cap (200 on Free), 1 sends each alone",
    )
    cloudflare_api_url: str = Field(
        "https://api.cloudflare.com/client/v4", description="base URL of Cloudflare's v4 API"
    )
    cloudflare_rate_limit: int = Field(
        1200, gt=0, description="calls Cloudflare allows each token (or user) per rate-limit window"
    )
    cloudflare_rate_window: Duration = Field(timedelta(minutes=5), description="Cloudflare's rate-limit window")
    cloudflare_budget_share: float = Field(
        0.8, gt=0, le=1, description="share of each token's 1,200 calls per 5 minutes that kflare may use"
    )
    health_probe_bind_address: str = ":8081"
    metrics_bind_address: str = ":8080"
    webhook_port: int = 9443
    webhook_cert_dir: Path | None = None
    metrics_secure: bool = True
    metrics_cert_path: Path | None = None
    log_level: str = "info"
    log_format: LogFormat = LogFormat.JSON

    @property
    def drift_checks_enabled(self) -> bool:
        return self.drift_check_interval > timedelta(0)


def split_bind_address(address: str) -> tuple[str, int] | None:
    """`:8080` or `127.0.0.1:8080` as (host, port); `0` turns a listener off, as in controller-runtime."""
    if address in ("0", ""):
        return None
    host, _, port = address.rpartition(":")
    return (host or "0.0.0.0", int(port))  # noqa: S104 (a Pod listens on all its addresses)
