"""What admission refuses in a Tunnel, a TunnelConfiguration and a DNSRecord pointing at a tunnel, with the path of
the field at fault; and how a configuration compares with what Cloudflare holds."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.validation import validate_object
from reconcilers.tunnel_configuration import normalise, says_something
from tests.unit.api import samples


def errors(kind: str, spec: dict[str, Any]) -> dict[str, str]:
    return {e.path: e.message for e in validate_object(kind, {"spec": spec})}


def config(*rules: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"tunnelRef": {"name": "t"}, "ingress": list(rules), **extra}


def test_the_go_controllers_manifests_are_accepted() -> None:
    for name in ("tunnel", "tunnel-configuration", "record-tunnel"):
        document = samples.load(samples.ALL[name])
        assert validate_object(document["kind"], document) == [], name


@pytest.mark.parametrize(
    ("rule", "path", "says"),
    [
        ({"hostname": "*", "service": "http://a:80"}, "spec.ingress[0].hostname", "put its service in defaultService"),
        ({"hostname": "app.example.com", "service": "ftp://a"}, "spec.ingress[0].service", "a service is"),
        ({"hostname": "app.example.com", "service": "tcp://db"}, "spec.ingress[0].service", "a service is"),
        ({"hostname": "app.example.com", "service": "http://a:99999"}, "spec.ingress[0].service", "out of range"),
        ({"hostname": "app.example.com", "service": "http_status:999"}, "spec.ingress[0].service", "a service is"),
        ({"hostname": "app_x.example.com", "service": "http://a"}, "spec.ingress[0].hostname", "not a DNS label"),
        ({"hostname": "localhost", "service": "http://a"}, "spec.ingress[0].hostname", "fully qualified"),
        ({"hostname": "a.example.com", "path": "(", "service": "http://a"}, "spec.ingress[0].path", "regular exp"),
    ],
)
def test_rules_cloudflared_could_not_run_are_refused(rule: dict[str, Any], path: str, says: str) -> None:
    found = errors("TunnelConfiguration", config(rule))
    assert says in found[path], found


def test_services_cloudflared_runs_are_accepted() -> None:
    services = ["http://web.ns.svc:8080", "https://[::1]:443/x", "tcp://db:5432", "unix:/run/app.sock",
                "http_status:404", "hello_world", "ssh://host:22"]  # fmt: skip
    rules = [{"hostname": f"h{i}.example.com", "service": s} for i, s in enumerate(services)]
    assert errors("TunnelConfiguration", config(*rules, defaultService="http_status:503")) == {}
    assert "spec.defaultService" in errors("TunnelConfiguration", config(rules[0], defaultService="nowhere"))
    assert "spec.ingress" in errors("TunnelConfiguration", config())  # at least one rule


def test_a_tunnel_name_that_is_a_uuid_is_refused() -> None:
    spec = {"name": "6f1c0a3e-1111-4222-8333-444455556666", "accountRef": {"name": "a"},
            "credentialsSecretRef": {"name": "s"}}  # fmt: skip
    assert "cannot be a UUID" in errors("Tunnel", spec)["spec.name"]
    assert "spec.credentialsSecretRef.name" in errors(
        "Tunnel", {**spec, "name": "t", "credentialsSecretRef": {"name": "A_B"}}
    )


def test_a_record_pointing_at_a_tunnel_takes_no_content_and_is_proxied() -> None:
    base = {"zoneRef": {"name": "z"}, "name": "app.example.com", "type": "CNAME", "tunnelRef": {"name": "t"}}
    assert errors("DNSRecord", base) == {}
    assert "leave content out" in errors("DNSRecord", {**base, "content": "x.example.com"})["spec.content"]
    assert "always proxied" in errors("DNSRecord", {**base, "proxied": False})["spec.proxied"]
    assert "only a CNAME" in errors("DNSRecord", {**base, "type": "A"})["spec.tunnelRef"]


def test_what_cloudflare_adds_or_drops_does_not_count_as_a_difference() -> None:
    ours = {"ingress": [{"hostname": "App.Example.com", "service": "http://a:80",
                         "originRequest": {"noTLSVerify": False}}, {"service": "http_status:404"}]}  # fmt: skip
    theirs = {"ingress": [{"hostname": "app.example.com", "service": "http://a:80", "originRequest": {}},
                          {"hostname": "*", "service": "http_status:404"}], "warp-routing": {"enabled": False},
              "originRequest": {}}  # fmt: skip
    assert normalise(ours) == normalise(theirs)
    assert normalise(ours) != normalise({**theirs, "warp-routing": {"enabled": True}})
    changed = {"ingress": [{"hostname": "app.example.com", "service": "http://b:80"}, {"service": "http_status:404"}]}
    assert normalise(ours) != normalise(changed)


def test_nothing_and_the_reset_rule_say_nothing() -> None:
    assert not says_something(None)
    assert not says_something({"ingress": [{"service": "http_status:404"}]})
    assert says_something({"ingress": [{"service": "http_status:503"}]})
