"""Flags take the Go controller's duration syntax and refuse what they cannot mean."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from app.settings import Settings, parse_duration, split_bind_address


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
