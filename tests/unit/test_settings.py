"""Flags take the Go controller's duration syntax and refuse what they cannot mean."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from pydantic import ValidationError

from app import server
from app.cli import build_parser, go_flags, main, settings_from
from app.settings import LogFormat, Settings, parse_duration, split_bind_address


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("1h30m", 5400), ("90s", 90), ("0s", 0), ("", 0), ("0", 0), ("500ms", 0.5), ("1.5h", 5400)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["5 minutes", "m5", "10x", "-5s"])
def test_bad_durations_name_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match="90s, 30m or 1h30m"):
        parse_duration(text)


def test_settings_from_flags_and_defaults() -> None:
    settings = Settings(drift_check_interval="10m", default_deletion_policy="retain")  # type: ignore[arg-type]
    assert settings.drift_check_interval == timedelta(minutes=10)
    assert settings.drift_checks_enabled
    assert settings.reconcile_timeout == timedelta(minutes=5)
    assert not Settings().drift_checks_enabled
    with pytest.raises(ValidationError, match="default_deletion_policy"):
        Settings(default_deletion_policy="keep")  # type: ignore[arg-type]


def test_bind_addresses() -> None:
    assert split_bind_address(":8080") == ("0.0.0.0", 8080)  # noqa: S104
    assert split_bind_address("127.0.0.1:9") == ("127.0.0.1", 9)
    assert split_bind_address("[::1]:9443") == ("::1", 9443)
    assert split_bind_address("0") is None


@pytest.mark.parametrize("address", ["8080", "::1:8080", "host:http", "127.0.0.1:70000"])
def test_bad_bind_addresses_are_refused(address: str) -> None:
    with pytest.raises(ValidationError, match="invalid bind address"):
        Settings(metrics_bind_address=address)


def test_the_webhook_address() -> None:
    assert Settings().webhook_address == ("0.0.0.0", 9443)  # noqa: S104 (all of a Pod's addresses, as before)
    assert Settings(webhook_bind_address="127.0.0.1:10443").webhook_address == ("127.0.0.1", 10443)
    assert Settings(webhook_bind_address="127.0.0.1").webhook_address == ("127.0.0.1", 9443)
    assert Settings(webhook_bind_address="0").webhook_address is None
    # --webhook-port, which the chart and older manifests pass, keeps working and wins over the port.
    assert Settings(webhook_port=10443).webhook_address == ("0.0.0.0", 10443)  # noqa: S104
    assert Settings(webhook_bind_address="127.0.0.1:1", webhook_port=2).webhook_address == ("127.0.0.1", 2)
    assert Settings(webhook_port=0).webhook_address is None


def run_settings(*argv: str) -> Settings:
    """What `kflare run ARGV...` runs with, through the same parsing as the command."""
    args = build_parser().parse_args(go_flags(["run", *argv]))
    return settings_from(args)


def test_the_go_controllers_flags_are_taken_with_their_meaning() -> None:
    """The flags a Deployment written for the Go controller passes (its chart sets --zap-devel, --zap-log-level and
    --zap-encoder) start kflare instead of ending it with "unrecognized arguments"."""
    s = run_settings(
        "--zap-log-level=debug",
        "--zap-encoder=console",
        "--zap-stacktrace-level=error",
        "--zap-time-encoding=rfc3339",
        "--enable-http2=false",
        "--leader-elect",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=:8443",
        "--metrics-secure",
        "--default-deletion-policy=retain",
        "--reconcile-timeout=5m",
        "--drift-check-interval=30m",
    )
    assert (s.log_level, s.log_format, s.zap_stacktrace_level, s.zap_time_encoding) == (
        "debug",
        LogFormat.TEXT,
        "error",
        "rfc3339",
    )
    assert (s.enable_http2, s.leader_elect, s.metrics_secure) == (False, True, True)
    assert s.drift_check_interval == timedelta(minutes=30)


def test_go_flags_with_one_dash_as_gos_flag_package_takes_them() -> None:
    s = run_settings("-leader-elect", "-zap-log-level=error", "-metrics-bind-address=0")
    assert (s.leader_elect, s.log_level, s.metrics_bind_address) == (True, "error", "0")


@pytest.mark.parametrize(
    ("level", "expected"), [("info", "info"), ("error", "error"), ("2", "debug"), ("panic", "critical")]
)
def test_zap_levels(level: str, expected: str) -> None:
    assert run_settings(f"--zap-log-level={level}").log_level == expected


def test_zap_devel_is_development_logging_unless_a_flag_says_otherwise() -> None:
    s = run_settings("--zap-devel")
    assert (s.log_level, s.log_format, s.zap_stacktrace_level) == ("debug", LogFormat.TEXT, "warning")
    s = run_settings("--zap-devel=true", "--zap-log-level=info", "--zap-encoder=json")
    assert (s.log_level, s.log_format) == ("info", LogFormat.JSON)
    assert run_settings("--zap-devel=false").log_level == "info"


def test_console_is_a_log_format() -> None:
    assert run_settings("--log-format", "console").log_format == LogFormat.TEXT


def test_a_zap_flag_and_its_kflare_twin_that_disagree_are_refused() -> None:
    with pytest.raises(ValidationError, match="--zap-log-level and --log-level disagree"):
        run_settings("--zap-log-level=debug", "--log-level=error")
    assert run_settings("--zap-log-level=debug", "--log-level=debug").log_level == "debug"


def test_enabling_http2_is_taken_with_a_warning_naming_the_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kflare's listeners speak HTTP/1.1 only: `--enable-http2=true` starts the process, and its log says the flag
    has no effect."""
    started: list[Settings] = []

    async def serve(settings: Settings) -> int:
        started.append(settings)
        return 0

    monkeypatch.setattr(server, "serve", serve)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    assert main(["run", "--enable-http2=true", "--zap-encoder=json"]) == 0
    assert started
    warning = next(json.loads(line) for line in capsys.readouterr().err.splitlines() if "--enable-http2" in line)
    assert warning["level"] == "warning"
    assert "no effect" in warning["msg"]
