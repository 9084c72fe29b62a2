"""The chart takes over from cloudflare-tunnel-gateway-controller only when asked: `gateway.tunnelGatewayPackage`
passes the controller its flag and grants reading the package's kinds, `gateway.controllerNames` adds names, and
the package's CRDs are rendered only with `crds: true` (a cluster moving from it has them from its own chart)."""

from __future__ import annotations

from typing import Any

from tests.chart.helm import Helm, Rendered

GATEWAY: dict[str, Any] = {
    "enabled": True,
    "tunnel": {"name": "tunnel-gateway-cloudflare-tunnel"},
    "dataPlane": {"tunnelTokenSecret": {"name": "tunnel-gateway-cloudflare-tunnel-token"}},
}
PACKAGE_CRDS = {
    "gatewayclassconfigs.cf.k8s.lex.la",
    "gatewayconfigs.cf.k8s.lex.la",
    "externalbackends.cf.k8s.lex.la",
}


def args(rendered: Rendered) -> list[str]:
    deployment = rendered.one("Deployment", "kflare")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def package_rules(rendered: Rendered) -> list[dict[str, Any]]:
    role = rendered.one("ClusterRole", "kflare-gateway")
    return [r for r in role["rules"] if "cf.k8s.lex.la" in r["apiGroups"]]


def crds(rendered: Rendered) -> set[str]:
    return {d["metadata"]["name"] for d in rendered.all("CustomResourceDefinition")}


def test_off_by_default(helm: Helm) -> None:
    rendered = helm.render({"gateway": GATEWAY})
    assert not [a for a in args(rendered) if "controller-names" in a or "tunnel-gateway-package" in a]
    assert not package_rules(rendered)
    assert not crds(rendered) & PACKAGE_CRDS


def test_on_passes_the_flag_grants_reading_and_installs_crds_only_when_asked(helm: Helm) -> None:
    values = {"gateway": {**GATEWAY, "tunnelGatewayPackage": {"enabled": True}, "controllerNames": ["example.com/gw"]}}
    rendered = helm.render(values)
    assert "--gateway-tunnel-gateway-package=true" in args(rendered)
    assert "--gateway-controller-names=example.com/gw" in args(rendered)
    (rule,) = package_rules(rendered)
    assert sorted(rule["resources"]) == ["externalbackends", "gatewayclassconfigs", "gatewayconfigs"]
    assert sorted(rule["verbs"]) == ["get", "list", "watch"]
    assert not crds(rendered) & PACKAGE_CRDS
    with_crds = helm.render({"gateway": {**GATEWAY, "tunnelGatewayPackage": {"enabled": True, "crds": True}}})
    assert crds(with_crds) >= PACKAGE_CRDS
