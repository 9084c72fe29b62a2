"""Every verb of every role the chart renders has a reason in docs/security.md ("The controller's roles"): a role
that grows without a line there fails here. And with `rbac.namespaces`, nothing cluster-wide reaches Secrets,
ConfigMaps or the data planes' objects."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.api.registry import CONFIGURATION_KINDS, INTERNAL_KINDS, KINDS
from tests.chart.helm import Helm, Rendered

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
HEADING = "## The controller's roles: every verb, and why"
PLURALS = {m.info.plural for m in (*KINDS, *CONFIGURATION_KINDS, *INTERNAL_KINDS)}
GATEWAY = {
    "enabled": True,
    "tunnel": {"name": "edge"},
    "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}},
}
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "gateway": {"gateway": GATEWAY},
    "gateway without planes": {"gateway": {**GATEWAY, "dedicatedPlanes": {"perNamespace": 0}}},
    "rbac.namespaces": {"rbac": {"namespaces": ["team-a", "team-b"]}},
    "gateway and rbac.namespaces": {"gateway": GATEWAY, "rbac": {"namespaces": ["team-a"]}},
    "gateway taking over cloudflare-tunnel-gateway-controller": {
        "gateway": {**GATEWAY, "tunnelGatewayPackage": {"enabled": True, "crds": True}}
    },
}


@dataclass(frozen=True)
class Row:
    role: str
    kind: str
    group: str
    resources: frozenset[str]
    verbs: frozenset[str]

    def covers(self, role: str, kind: str, group: str, resource: str, verb: str) -> bool:
        if (self.role, self.kind, self.group) != (role, kind, group) or verb not in self.verbs:
            return False
        if resource in self.resources:
            return True
        base, _, sub = resource.partition("/")
        token = f"`<kinds>/{sub}`" if sub else "`<kinds>`"
        return group == "kflare.dev" and base in PLURALS and token in self.resources


def documented() -> list[Row]:
    text = DOC.read_text()
    assert HEADING in text, f"{DOC} has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] in ("role", "---"):
            continue
        role, kind, group, resources, verbs, why = cells
        assert why, f"a row without a reason: {line}"
        group = "" if group in ("(core)", "(non-resource)") else group
        split = {r.strip() for r in re.split(r",\s*", resources)}
        rows.append(Row(role, kind, group, frozenset(split), frozenset(v.strip() for v in verbs.split(","))))
    assert rows, f"no table under {HEADING!r}"
    return rows


def granted(rendered: Rendered) -> list[tuple[str, str, str, str, str]]:
    """Every (role, kind, API group, resource, verb) the chart grants, role names without the release's prefix."""
    out = []
    for doc in rendered:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        role = doc["metadata"]["name"].removeprefix("kflare-")
        for rule in doc.get("rules") or []:
            groups = rule.get("apiGroups") or [""]
            for group in groups:
                for resource in rule.get("resources") or rule.get("nonResourceURLs") or []:
                    for verb in rule["verbs"]:
                        out.append((role, doc["kind"], group, resource, verb))
    return out


@pytest.mark.parametrize("configuration", sorted(CONFIGURATIONS))
def test_every_verb_the_chart_grants_has_a_reason_in_the_security_guide(helm: Helm, configuration: str) -> None:
    rows = documented()
    missing = sorted(
        {g for g in granted(helm.render(CONFIGURATIONS[configuration])) if not any(r.covers(*g) for r in rows)}
    )
    assert not missing, f"with {configuration}, these grants have no line in {DOC.name} ({HEADING!r}): " + "; ".join(
        f"{role} ({kind}) {group or 'core'} {resource}: {verb}" for role, kind, group, resource, verb in missing
    )


def test_with_rbac_namespaces_secrets_configmaps_and_planes_are_granted_in_those_namespaces_only(helm: Helm) -> None:
    rendered = helm.render(CONFIGURATIONS["gateway and rbac.namespaces"])
    narrowed = {"secrets", "configmaps", "deployments", "serviceaccounts", "networkpolicies", "poddisruptionbudgets"}
    for doc in rendered.all("ClusterRole"):
        for rule in doc.get("rules") or []:
            assert not narrowed & set(rule.get("resources") or []), f"{doc['metadata']['name']} grants {rule}"
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in rendered.all("Role")}
    assert {("team-a", "kflare-granted"), ("kflare-system", "kflare-granted")} <= roles
    bindings = {(b["metadata"]["namespace"], b["roleRef"]["name"]) for b in rendered.all("RoleBinding")}
    assert ("team-a", "kflare-granted") in bindings
    manager = rendered.one("Deployment", "kflare")["spec"]["template"]["spec"]["containers"][0]
    assert "--granted-namespaces=kflare-system,team-a" in manager["args"]


def test_the_table_names_no_role_the_chart_does_not_render(helm: Helm) -> None:
    """A role renamed or removed leaves no stale rows behind."""
    rendered_roles = {g[0] for c in CONFIGURATIONS.values() for g in granted(helm.render(c))}
    assert {row.role for row in documented()} <= rendered_roles
