"""`helm lint` and `helm template` over a matrix of values: what the chart renders for each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app import __version__
from app.api.registry import CONFIGURATION_KINDS, INTERNAL_KINDS
from tests.chart.helm import CHART, HELMS, Helm, Rendered, crd_plurals, helm_binary
from webhooks.configuration import NOT_BEING_DELETED

PRODUCTION_VALUES = Path(__file__).with_name("values-production.yaml")
NAMESPACE = "kflare-system"


@pytest.fixture(scope="module")
def default(helm: Helm) -> Rendered:
    return helm.render()


def test_chart_metadata_matches_the_package() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "kflare"
    assert chart["version"] == __version__
    assert chart["appVersion"] == __version__
    assert chart["kubeVersion"] == ">=1.34.0-0"


def generated_left_out(rendered: Rendered) -> list[dict[str, Any]]:
    """The documents, less what each render generates anew: Secrets' keys and tokens, the webhooks' CA bundle, and
    checksums of them."""
    docs = []
    for doc in rendered:
        doc = {k: v for k, v in doc.items() if not (doc["kind"] == "Secret" and k in ("data", "stringData"))}
        for webhook in doc.get("webhooks") or []:
            webhook["clientConfig"].pop("caBundle", None)
        for meta in (doc["metadata"], doc.get("spec", {}).get("template", {}).get("metadata", {})):
            annotations = meta.get("annotations") or {}
            for key in [key for key in annotations if key.startswith("checksum/")]:
                del annotations[key]
        docs.append(doc)
    return docs


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"webhook": {"enabled": False}, "driftCheckInterval": "1m"},
        {
            "webhook": {"enabled": False},
            "gateway": {
                "enabled": True,
                "className": "tunnel",
                "tunnel": {"name": "edge"},
                "dataPlane": {"tunnelTokenSecret": {"name": "edge-token"}},
            },
        },
    ],
    ids=["defaults", "no-webhook", "gateway"],
)
def test_both_helms_render_the_same_objects(tmp_path: Path, values: dict[str, Any]) -> None:
    """Why the tests running kflare under the chart's RBAC install it with one Helm only (`ONE_HELM`)."""
    helm3, helm4 = (Helm(helm_binary(name), tmp_path / name) for name in HELMS)
    assert generated_left_out(helm3.render(values)) == generated_left_out(helm4.render(values))


@pytest.mark.parametrize("values", [None, PRODUCTION_VALUES], ids=["defaults", "production"])
def test_lint(helm: Helm, values: Path | None) -> None:
    args = ["-f", str(values)] if values else []
    done = helm.run("lint", "--strict", str(CHART), "--namespace", NAMESPACE, *args)
    assert "0 chart(s) failed" in done.stdout


def test_production_values_render(helm: Helm) -> None:
    out = helm.render(args=["-f", str(PRODUCTION_VALUES)])
    assert out.one("HorizontalPodAutoscaler")["spec"]["minReplicas"] == 2
    assert out.one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert out.one("ServiceMonitor")["metadata"]["labels"]["release"] == "prometheus"
    assert out.find("NetworkPolicy") is not None
    assert out.container["image"].endswith("@sha256:" + "0123456789abcdef" * 4)
    assert out.container["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    assert out.flag("default-deletion-policy") == "retain"
    assert out.flag("drift-check-interval") == "30m"
    spread = out.pod["topologySpreadConstraints"][0]
    assert spread["labelSelector"]["matchLabels"].items() <= out.deployment["spec"]["selector"]["matchLabels"].items()


def test_default_objects(default: Rendered) -> None:
    names = {(d["kind"], d["metadata"]["name"]) for d in default}
    assert names >= {
        ("ServiceAccount", "kflare"),
        ("Deployment", "kflare"),
        ("Service", "kflare-metrics"),
        ("Service", "kflare-webhook"),
        ("ClusterRole", "kflare-manager"),
        ("ClusterRoleBinding", "kflare-manager"),
        ("Role", "kflare-leader-election"),
        ("RoleBinding", "kflare-leader-election"),
        ("ClusterRole", "kflare-metrics-reader"),
        ("ClusterRole", "kflare-view"),
        ("ClusterRole", "kflare-edit"),
        ("HorizontalPodAutoscaler", "kflare"),
        ("PodDisruptionBudget", "kflare"),
        ("ValidatingWebhookConfiguration", "kflare"),
    }
    assert default.find("Secret") is None, "the chart generates a Secret: it would change on every render"
    configuration = {f"{m.info.plural}.kflare.dev" for m in (*CONFIGURATION_KINDS, *INTERNAL_KINDS)}
    assert {f"{p}.kflare.dev" for p in crd_plurals()} | configuration == {
        d["metadata"]["name"] for d in default.all("CustomResourceDefinition")
    }
    assert not default.kinds & {"ServiceMonitor", "Issuer", "Certificate"}
    for doc in default:
        if doc["kind"] != "CustomResourceDefinition":
            labels = doc["metadata"]["labels"]
            assert labels["app.kubernetes.io/instance"] == "kflare", doc["kind"]
            assert labels["app.kubernetes.io/managed-by"] == "Helm", doc["kind"]
            if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"):
                assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]


def test_release_name_prefixes_names(helm: Helm) -> None:
    out = helm.render(release="edge")
    assert out.deployment["metadata"]["name"] == "edge-kflare"
    assert out.one("Service", "edge-kflare-metrics")
    assert out.one("ClusterRole", "edge-kflare-manager")
    # The scrapers' role keeps its documented name whatever the release is called.
    assert out.one("ClusterRole", "kflare-metrics-reader")
    assert helm.render({"fullnameOverride": "cf"}).deployment["metadata"]["name"] == "cf"


def test_restricted_pod_security(default: Rendered) -> None:
    pod, container = default.pod, default.container
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["runAsGroup"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["runAsNonRoot"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
    assert not pod.get("hostNetwork")
    assert not pod.get("hostPID")
    assert all("hostPath" not in v for v in pod["volumes"])


def test_deployment_defaults(default: Rendered) -> None:
    pod, container = default.pod, default.container
    assert container["name"] == "manager"
    assert container["image"] == f"ghcr.io/kflare-dev/kflare:{__version__}"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["kflare"]
    assert default.args[0] == "run"
    assert default.args[1:] == [
        f"--namespace={NAMESPACE}",
        "--leader-elect=true",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=:8080",
        "--metrics-secure=true",
        "--metrics-cert-path=/tmp/kflare/serving-certs",
        "--webhook-port=9443",
        "--webhook-cert-dir=/tmp/kflare/serving-certs",
        "--webhook-cert-secret=kflare-webhook-tls",
        f"--webhook-cert-names=kflare-webhook.{NAMESPACE}.svc,kflare-webhook.{NAMESPACE}.svc.cluster.local,"
        f"kflare-metrics.{NAMESPACE}.svc,kflare-metrics.{NAMESPACE}.svc.cluster.local",
        "--webhook-configuration=kflare",
        "--drift-check-interval=0s",
        "--reconcile-timeout=5m",
        "--shutdown-delay=5s",
        "--default-deletion-policy=delete",
        "--default-account-namespaces=All",
        "--log-level=info",
        "--log-format=json",
    ]
    # The shutdown delay (5 s of answering after SIGTERM) and the stop after it fit in the grace period.
    assert pod["terminationGracePeriodSeconds"] == 20
    assert pod["serviceAccountName"] == "kflare"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8080, "webhook": 9443, "probes": 8081}
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "probes"},
        "initialDelaySeconds": 15,
        "periodSeconds": 20,
    }
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/readyz", "port": "probes"},
        "initialDelaySeconds": 5,
        "periodSeconds": 10,
    }
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "96Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    }
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    # The controller writes the certificate it keeps into its /tmp (an emptyDir): no Secret is mounted for it.
    assert "serving-cert" not in mounts
    assert mounts["tmp"]["mountPath"] == "/tmp"
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priorityClassName"):
        assert key not in pod
    assert "imagePullSecrets" not in pod


def test_services(default: Rendered) -> None:
    selector = default.deployment["spec"]["selector"]["matchLabels"]
    assert default.deployment["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
    metrics = default.one("Service", "kflare-metrics")
    assert metrics["spec"]["type"] == "ClusterIP"
    assert metrics["spec"]["selector"] == selector
    assert metrics["spec"]["ports"] == [
        {"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP", "appProtocol": "https"}
    ]
    webhook = default.one("Service", "kflare-webhook")
    assert webhook["spec"]["selector"] == selector
    assert webhook["spec"]["ports"][0]["port"] == 443
    assert webhook["spec"]["ports"][0]["targetPort"] == "webhook"


def test_values_reach_the_manager(helm: Helm) -> None:
    out = helm.render(
        {
            "driftCheckInterval": "1h30m",
            "reconcileTimeout": "0s",
            "defaultDeletionPolicy": "retain",
            "logging": {"level": "debug", "format": "console"},
            "leaderElection": False,
            "autoscaling": {"enabled": False},
            "healthPort": 9000,
            "metrics": {"port": 9090, "secure": False},
            "webhook": {"port": 10443},
            "extraArgs": ["--resync-period=6h"],
            "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
            ],
            "podAnnotations": {"example.com/a": "b"},
            "podLabels": {"team": "edge"},
            "priorityClassName": "system-cluster-critical",
            "resources": {"requests": {"cpu": "200m"}, "limits": {"memory": "1Gi"}},
        }
    )
    assert out.flag("drift-check-interval") == "1h30m"
    assert out.flag("reconcile-timeout") == "0s"
    assert out.flag("default-deletion-policy") == "retain"
    assert out.flag("log-level") == "debug"
    assert out.flag("log-format") == "text"  # the controller's name for console output
    assert out.flag("leader-elect") == "false"
    assert out.deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert out.flag("health-probe-bind-address") == ":9000"
    assert out.flag("metrics-bind-address") == ":9090"
    assert out.flag("metrics-secure") == "false"
    assert out.flag("metrics-cert-path") is None  # plain HTTP needs no certificate
    assert out.flag("webhook-port") == "10443"
    assert out.args[-1] == "--resync-period=6h"
    assert {"name": "HTTPS_PROXY", "value": "http://proxy:3128"} in out.container["env"]
    ports = {p["name"]: p["containerPort"] for p in out.container["ports"]}
    assert ports == {"metrics": 9090, "webhook": 10443, "probes": 9000}
    pod = out.pod
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert "nodeAffinity" in pod["affinity"]
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["priorityClassName"] == "system-cluster-critical"
    template = out.deployment["spec"]["template"]["metadata"]
    assert template["annotations"] == {"example.com/a": "b"}
    assert template["labels"]["team"] == "edge"
    assert out.container["resources"] == {
        "requests": {"cpu": "200m", "memory": "96Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    assert out.one("Service", "kflare-metrics")["spec"]["ports"][0]["appProtocol"] == "http"


@pytest.mark.parametrize(
    ("values", "image"),
    [
        ({}, f"ghcr.io/kflare-dev/kflare:{__version__}"),
        ({"image": {"tag": "0.2.0-rc.1"}}, "ghcr.io/kflare-dev/kflare:0.2.0-rc.1"),
        (
            {"image": {"repository": "mirror.example/kflare", "tag": "x", "digest": "sha256:" + "ab" * 32}},
            "mirror.example/kflare@sha256:" + "ab" * 32,
        ),
    ],
    ids=["appVersion", "tag", "digest"],
)
def test_image(helm: Helm, values: dict[str, Any], image: str) -> None:
    assert helm.render(values).container["image"] == image


def test_image_pull_secrets_and_policy(helm: Helm) -> None:
    out = helm.render({"imagePullSecrets": [{"name": "regcred"}], "image": {"pullPolicy": "Always"}})
    assert out.pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert out.container["imagePullPolicy"] == "Always"


@pytest.mark.parametrize(
    ("values", "replicas", "hpa", "pdb"),
    [
        ({}, None, True, True),
        ({"autoscaling": {"minReplicas": 2, "maxReplicas": 4}}, None, True, True),
        ({"autoscaling": {"maxReplicas": 1}}, None, True, False),
        ({"autoscaling": {"enabled": False}}, 1, False, False),
        ({"autoscaling": {"enabled": False}, "replicaCount": 3}, 3, False, True),
        (
            {"autoscaling": {"enabled": False}, "replicaCount": 3, "podDisruptionBudget": {"enabled": False}},
            3,
            False,
            False,
        ),
    ],
    ids=["hpa-default", "hpa-2-4", "hpa-max-1", "fixed-1", "fixed-3", "fixed-3-no-pdb"],
)
def test_replicas_hpa_and_pdb(helm: Helm, values: dict[str, Any], replicas: int | None, hpa: bool, pdb: bool) -> None:
    out = helm.render(values)
    spec = out.deployment["spec"]
    if replicas is None:
        assert "replicas" not in spec  # nothing fights the autoscaler
    else:
        assert spec["replicas"] == replicas
    assert (out.find("HorizontalPodAutoscaler") is not None) == hpa
    found = out.find("PodDisruptionBudget")
    assert (found is not None) == pdb
    if found is not None:
        assert found["spec"]["maxUnavailable"] == 1
        assert found["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]


def test_hpa(helm: Helm, default: Rendered) -> None:
    spec = default.one("HorizontalPodAutoscaler")["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kflare"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 10)
    assert spec["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    ]
    assert spec["behavior"] == {"scaleUp": {"stabilizationWindowSeconds": 120}}
    behavior = {"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}
    tuned = helm.render(
        {
            "autoscaling": {
                "behavior": behavior,
                "targetMemoryUtilizationPercentage": 90,
                "targetCPUUtilizationPercentage": 50,
            }
        }
    ).one("HorizontalPodAutoscaler")["spec"]
    # helm merges maps: the default scaleUp stays unless set to null.
    assert tuned["behavior"]["scaleDown"] == behavior["scaleDown"]
    targets = {m["resource"]["name"]: m["resource"]["target"]["averageUtilization"] for m in tuned["metrics"]}
    assert targets == {"cpu": 50, "memory": 90}
    bad = helm.template({"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}, check=False)
    assert bad.returncode != 0
    assert "maxReplicas" in bad.stderr


def test_crds_toggles(helm: Helm, default: Rendered) -> None:
    crds = default.all("CustomResourceDefinition")
    assert crds
    for crd in crds:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["spec"]["group"] == "kflare.dev"
    unkept = helm.render({"crds": {"keep": False}}).all("CustomResourceDefinition")
    assert len(unkept) == len(crds)
    assert all("helm.sh/resource-policy" not in (c["metadata"].get("annotations") or {}) for c in unkept)
    assert not helm.render({"crds": {"enabled": False}}).all("CustomResourceDefinition")


def _rules(role: dict[str, Any]) -> dict[str, set[str]]:
    """resource (or non-resource URL) -> verbs."""
    verbs: dict[str, set[str]] = {}
    for rule in role["rules"]:
        for group in rule.get("apiGroups", [None]):
            for resource in rule.get("resources", rule.get("nonResourceURLs", [])):
                key = resource if group in (None, "") else f"{resource}.{group}"
                verbs.setdefault(key, set()).update(rule["verbs"])
    return verbs


def test_every_crd_is_known_to_the_chart(default: Rendered) -> None:
    """The kinds list in _helpers.tpl drives RBAC and webhooks: a CRD added without it would be unmanageable."""
    manager = _rules(default.one("ClusterRole", "kflare-manager"))
    webhooks = {w["rules"][0]["resources"][0]: w for w in default.one("ValidatingWebhookConfiguration")["webhooks"]}
    for plural, scope in crd_plurals().items():
        assert f"{plural}.kflare.dev" in manager, plural
        assert webhooks[plural]["rules"][0]["scope"] == ("Cluster" if scope == "Cluster" else "Namespaced"), plural


def test_manager_rbac(default: Rendered) -> None:
    rules = _rules(default.one("ClusterRole", "kflare-manager"))
    for plural in crd_plurals():
        assert rules[f"{plural}.kflare.dev"] == {"get", "list", "watch", "create", "update", "patch", "delete"}
        assert rules[f"{plural}/status.kflare.dev"] == {"get", "update", "patch"}
        assert rules[f"{plural}/finalizers.kflare.dev"] == {"update"}
    assert rules["secrets"] == {"get", "list", "watch", "create", "patch", "update"}  # never delete
    assert rules["configmaps"] == {"get", "list", "watch"}  # a Worker's code: read, never written
    # The claims of adopted objects: created and let go of, never changed.
    assert rules["cloudflareclaims.kflare.dev"] == {"get", "list", "watch", "create", "delete"}
    assert rules["namespaces"] == {"get", "list", "watch"}  # their labels, which accounts' policies select on
    assert {key for key in rules if not key.endswith(".kflare.dev")} == {
        "namespaces",
        "secrets",
        "configmaps",
        "events.events.k8s.io",
        "tokenreviews.authentication.k8s.io",
        "subjectaccessreviews.authorization.k8s.io",
        "validatingwebhookconfigurations.admissionregistration.k8s.io",
    }, "nothing more than that"
    # The release's own webhook configuration, by name, and only its caBundle's two verbs.
    role = default.one("ClusterRole", "kflare-manager")
    (hooks,) = [r for r in role["rules"] if "validatingwebhookconfigurations" in r["resources"]]
    assert (hooks["resourceNames"], sorted(hooks["verbs"])) == (["kflare"], ["get", "patch"])
    assert rules["events.events.k8s.io"] == {"create", "patch"}
    assert rules["tokenreviews.authentication.k8s.io"] == {"create"}
    assert rules["subjectaccessreviews.authorization.k8s.io"] == {"create"}
    assert "leases.coordination.k8s.io" not in rules  # only in the namespace's Role
    assert not any("*" in key for key in rules)
    binding = default.one("ClusterRoleBinding", "kflare-manager")
    assert binding["roleRef"]["name"] == "kflare-manager"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kflare", "namespace": NAMESPACE}]

    role = default.one("Role", "kflare-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    election = _rules(role)
    assert election["leases.coordination.k8s.io"] == {"get", "list", "watch", "create", "update", "patch", "delete"}
    # Events are events.k8s.io Events, granted cluster-wide above: core Events kflare never records.
    assert set(election) == {"leases.coordination.k8s.io"}
    rb = default.one("RoleBinding", "kflare-leader-election")
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kflare-leader-election"}

    reader = default.one("ClusterRole", "kflare-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_aggregated_roles(helm: Helm, default: Rendered) -> None:
    view = default.one("ClusterRole", "kflare-view")
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    view_rules = _rules(view)
    for plural in crd_plurals():
        assert view_rules[f"{plural}.kflare.dev"] == {"get", "list", "watch"}
    edit = default.one("ClusterRole", "kflare-edit")
    labels = edit["metadata"]["labels"]
    assert labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert labels["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    edit_rules = _rules(edit)
    for plural, scope in crd_plurals().items():
        if scope == "Namespaced":
            assert {"create", "update", "patch", "delete"} <= edit_rules[f"{plural}.kflare.dev"]
    # Creating an account means using any token Secret in any namespace: never in edit or admin.
    for role in default.all("ClusterRole"):
        aggregates = {k for k, v in role["metadata"]["labels"].items() if "aggregate-to-" in k and v == "true"}
        if aggregates & {"rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"}:
            assert not any(r.startswith("cloudflareaccounts") for r in _rules(role)), role["metadata"]["name"]
    # Claims are kflare's record of who owns what: no aggregated role reads or writes them.
    assert not any(r.startswith("cloudflareclaims") for r in [*view_rules, *edit_rules])
    out = helm.render({"rbac": {"aggregateToDefaultRoles": False}})
    assert out.find("ClusterRole", "kflare-view") is None
    assert out.find("ClusterRole", "kflare-edit") is None
    none = helm.render({"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "byo"}})
    assert not none.all("ClusterRole")
    assert not none.all("Role")
    assert not none.all("ServiceAccount")
    assert none.pod["serviceAccountName"] == "byo"


def test_service_monitor(helm: Helm, default: Rendered) -> None:
    assert default.find("ServiceMonitor") is None
    out = helm.render(
        {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}, "interval": "15s"}}}
    )
    sm = out.one("ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    service = out.one("Service", "kflare-metrics")
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert (
        not sm["spec"]["selector"]["matchLabels"].items()
        <= out.one("Service", "kflare-webhook")["metadata"]["labels"].items()
    )
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["scheme"] == "https"
    assert endpoint["interval"] == "15s"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    # Verified against the CA of the chart's serving certificate, which the metrics listener serves.
    assert endpoint["tlsConfig"] == {
        "serverName": f"kflare-metrics.{NAMESPACE}.svc",
        "ca": {"secret": {"name": "kflare-webhook-tls", "key": "ca.crt"}},
    }
    assert "insecureSkipVerify" not in str(sm)


def test_metrics_cert_secret(helm: Helm) -> None:
    out = helm.render(
        {
            "metrics": {"certSecret": "kflare-metrics-tls", "serviceMonitor": {"enabled": True}},
            "webhook": {"enabled": False},
        }
    )
    assert out.flag("metrics-cert-path") == "/etc/kflare/metrics-certs"
    mounts = {m["name"]: m["mountPath"] for m in out.container["volumeMounts"]}
    assert mounts["metrics-cert"] == "/etc/kflare/metrics-certs"
    assert {"name": "metrics-cert", "secret": {"secretName": "kflare-metrics-tls"}} in out.pod["volumes"]
    # No webhook and a certificate of the user's: the chart makes none.
    assert out.find("Secret") is None
    assert "serving-cert" not in mounts
    (endpoint,) = out.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "kflare-metrics-tls", "key": "ca.crt"}}


@pytest.mark.parametrize(
    ("sm", "tls"),
    [
        (
            {"tlsConfig": {"ca": {"configMap": {"name": "cas", "key": "ca.pem"}}}},
            {"ca": {"configMap": {"name": "cas", "key": "ca.pem"}}},
        ),
        ({"insecureSkipVerify": True}, {"insecureSkipVerify": True}),
    ],
    ids=["tlsConfig", "insecureSkipVerify"],
)
def test_service_monitor_tls_overrides(helm: Helm, sm: dict[str, Any], tls: dict[str, Any]) -> None:
    out = helm.render({"metrics": {"serviceMonitor": {"enabled": True, **sm}}})
    assert out.one("ServiceMonitor")["spec"]["endpoints"][0]["tlsConfig"] == tls


def test_plain_http_metrics(helm: Helm) -> None:
    out = helm.render(
        {"metrics": {"secure": False, "serviceMonitor": {"enabled": True}}, "webhook": {"enabled": False}}
    )
    (endpoint,) = out.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "http"
    assert "bearerTokenFile" not in endpoint
    assert "tlsConfig" not in endpoint
    assert out.find("Secret") is None  # nothing needs a serving certificate
    assert all(v["name"] != "serving-cert" for v in out.pod["volumes"])
    off = helm.render({"metrics": {"enabled": False}})
    assert off.flag("metrics-bind-address") == "0"
    assert off.find("Service", "kflare-metrics") is None
    assert "metrics" not in {p["name"] for p in off.container["ports"]}


def test_network_policy(helm: Helm, default: Rendered) -> None:
    # On by default; rendered with no cluster (as here, or by Argo CD) it has the configured API server ports, to
    # any address (installed, the addresses and ports of the API server's EndpointSlices: tests/chart/test_install.py).
    spec = default.one("NetworkPolicy")["spec"]
    assert spec["egress"][1] == {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert helm.render({"networkPolicy": {"enabled": False}}).find("NetworkPolicy") is None
    failed = helm.template({"networkPolicy": {"apiServer": {"ports": []}}}, check=False)
    assert failed.returncode != 0  # a policy with no port for the API server would cut the controller off
    assert "/networkPolicy/apiServer/ports': minItems" in failed.stderr
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    proxy = {"to": [{"ipBlock": {"cidr": "10.0.0.10/32"}}], "ports": [{"port": 3128}]}
    out = helm.render({"networkPolicy": {"enabled": True, "metricsFrom": [monitoring], "extraEgress": [proxy]}})
    spec = out.one("NetworkPolicy")["spec"]
    assert spec["podSelector"]["matchLabels"] == out.deployment["spec"]["selector"]["matchLabels"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    metrics, webhook = spec["ingress"]
    assert metrics == {"ports": [{"port": 8080, "protocol": "TCP"}], "from": [monitoring]}
    assert webhook == {"ports": [{"port": 9443, "protocol": "TCP"}]}  # from anywhere: the API server
    dns, api, cloudflare, extra = spec["egress"]
    assert dns["ports"] == [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    assert dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    assert api == {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert cloudflare == {"ports": [{"port": 443, "protocol": "TCP"}]}
    assert extra == proxy

    narrowed = helm.render(
        {
            "networkPolicy": {
                "enabled": True,
                "apiServer": {"ports": [16443], "to": [{"ipBlock": {"cidr": "192.0.2.1/32"}}]},
            },
            "webhook": {"enabled": False},
        }
    ).one("NetworkPolicy")["spec"]
    (anyone,) = narrowed["ingress"]
    assert "from" not in anyone  # empty metricsFrom: any source
    assert narrowed["egress"][1] == {
        "ports": [{"port": 16443, "protocol": "TCP"}],
        "to": [{"ipBlock": {"cidr": "192.0.2.1/32"}}],
    }


def test_two_renders_with_the_same_values_are_the_same_bytes(helm: Helm) -> None:
    """What Argo CD does on every sync (`helm template`): a chart that generated a certificate would change the
    caBundle under the running pods and never show Synced."""
    for values in ({}, {"metrics": {"serviceMonitor": {"enabled": True}}}, {"webhook": {"enabled": False}}):
        assert helm.template(values).stdout == helm.template(values).stdout, values


def test_webhook_with_the_controllers_certificate(default: Rendered) -> None:
    config = default.one("ValidatingWebhookConfiguration")
    assert "annotations" not in config["metadata"]
    hooks = config["webhooks"]
    plurals = [h["rules"][0]["resources"][0] for h in hooks]
    assert set(crd_plurals()) <= set(plurals)
    assert len(plurals) == len(set(plurals)) == len({h["name"] for h in hooks})
    for hook, plural in zip(hooks, plurals, strict=True):
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] == 10
        assert hook["clientConfig"]["service"] == {
            "name": "kflare-webhook",
            "namespace": NAMESPACE,
            "path": f"/validate/{plural}",
            "port": 443,
        }
        assert "caBundle" not in hook["clientConfig"]  # the controller keeps it (rendered with no cluster: none)
        (rule,) = hook["rules"]
        assert rule["apiGroups"] == ["kflare.dev"]
        assert rule["apiVersions"] == ["v1alpha1"]
        assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
        conditions = {c["name"]: c["expression"] for c in hook["matchConditions"]}
        assert conditions["not-being-deleted"] == NOT_BEING_DELETED["expression"]
        assert f"system:serviceaccount:{NAMESPACE}:kflare" in conditions["not-the-controller"]


def test_webhook_values(helm: Helm) -> None:
    out = helm.render({"webhook": {"failurePolicy": "Ignore", "timeoutSeconds": 3}})
    for hook in out.one("ValidatingWebhookConfiguration")["webhooks"]:
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 3)
    off = helm.render({"webhook": {"enabled": False}})
    assert off.find("ValidatingWebhookConfiguration") is None
    assert off.find("Service", "kflare-webhook") is None
    assert off.flag("webhook-port") == "0"
    assert "webhook" not in {p["name"] for p in off.container["ports"]}
    # The metrics listener still serves the certificate the controller keeps; no webhooks' caBundle to keep.
    assert off.flag("metrics-cert-path") == "/tmp/kflare/serving-certs"
    assert off.flag("webhook-cert-dir") == "/tmp/kflare/serving-certs"
    assert off.flag("webhook-cert-secret") == "kflare-webhook-tls"
    assert off.flag("webhook-configuration") is None


def test_webhook_with_cert_manager(helm: Helm) -> None:
    out = helm.render({"webhook": {"certManager": {"enabled": True}}, "metrics": {"serviceMonitor": {"enabled": True}}})
    assert out.find("Secret") is None  # cert-manager makes it
    issuer = out.one("Issuer", "kflare-selfsigned")
    assert issuer["spec"] == {"selfSigned": {}}
    cert = out.one("Certificate", "kflare-serving-cert")
    assert cert["spec"]["secretName"] == "kflare-serving-cert-cm"
    assert cert["spec"]["issuerRef"] == {"name": "kflare-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}
    assert {f"kflare-webhook.{NAMESPACE}.svc", f"kflare-metrics.{NAMESPACE}.svc"} <= set(cert["spec"]["dnsNames"])
    config = out.one("ValidatingWebhookConfiguration")
    assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/kflare-serving-cert"}
    assert all("caBundle" not in h["clientConfig"] for h in config["webhooks"])
    assert {"name": "serving-cert", "secret": {"secretName": "kflare-serving-cert-cm"}} in out.pod["volumes"]
    assert out.one("ServiceMonitor")["spec"]["endpoints"][0]["tlsConfig"]["ca"] == {
        "secret": {"name": "kflare-serving-cert-cm", "key": "ca.crt"}
    }

    own = helm.render(
        {"webhook": {"certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}}
    )
    assert own.find("Issuer") is None
    assert own.one("Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


def test_leader_election_off_needs_one_replica(helm: Helm, default: Rendered) -> None:
    assert "strategy" not in default.deployment["spec"]  # rolling updates: the new pod waits for the Lease
    for values in (
        {"leaderElection": False},
        {"leaderElection": False, "autoscaling": {"enabled": False}, "replicaCount": 2},
    ):
        done = helm.template(values, check=False)
        assert done.returncode != 0
        assert "leaderElection: false needs a single replica" in done.stderr
