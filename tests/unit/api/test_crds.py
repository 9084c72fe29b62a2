"""The CRDs generated from the models: structural, complete, and generic enough for kinds still to come."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from app.api import KINDS, DNSRecord, Zone, immutable_violations, validate_object
from app.api.base import KflareModel, KindInfo, PrinterColumn
from app.api.crds import (
    HEADER,
    cel_field,
    column_paths,
    crd,
    crd_filename,
    immutable_rule,
    main_write,
    openapi_schema,
    render_crds,
    render_package_crds,
    write_crds,
)
from app.api.docs import load_yaml
from app.api.meta import Status
from app.api.refs import LocalObjectReference
from app.api.registry import CRD_KINDS
from app.api.resource import Resource, ResourceClass
from app.api.schema import SchemaError, structural_schema
from app.api.storage import D1Database, KVNamespace, R2Bucket
from app.api.tunnel_gateway_package import PACKAGE_KINDS
from app.api.workers import WorkerRoute, WorkerScript
from tests.unit.api.structural import structural_problems, unbounded

pytestmark = pytest.mark.heavy

# A kind that exercises what later kinds will need: optional and nested immutable fields, a CEL-reserved field
# name, a discriminated union, int-or-string, maps, sets, free-form values, exclusive bounds.


class _Inner(KflareModel):
    key: Annotated[str, Field(max_length=50)]
    namespace: Annotated[str, Field(max_length=63)] | None = None


class _Static(KflareModel):
    mode: Literal["static"]
    value: Annotated[str, Field(max_length=100)]


class _Computed(KflareModel):
    mode: Literal["expression"]
    expression: Annotated[str, Field(max_length=100)]


class WidgetSpec(KflareModel):
    """What a widget should be."""

    name: Annotated[str, Field(max_length=63)]
    """The widget's name."""
    location_hint: Literal["weur", "enam"] | None = None
    namespace: Annotated[str, Field(max_length=63)] | None = None
    inner: _Inner
    port: int | str = 80
    target: Annotated[_Static | _Computed, Field(discriminator="mode")] | None = None
    labels: dict[str, str] | None = None
    flags: Annotated[set[Annotated[str, Field(max_length=20)]], Field(max_length=5)] | None = None
    blob: Any = None
    settings: dict[str, Any] | None = None
    owner: LocalObjectReference | None = None
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5
    must_be_there: int | None
    """Required, but may be null."""


class WidgetStatus(Status):
    """What kflare saw."""

    widget_id: Annotated[str, Field(max_length=64)] | None = None


class Widget(Resource[WidgetSpec, WidgetStatus]):
    """Widget is only a test kind."""

    info = KindInfo(
        kind="Widget",
        plural="widgets",
        short_names=("wd",),
        columns=(PrinterColumn("Widget ID", ".status.widgetID", priority=1),),
        immutable=("name", "locationHint", "namespace", "inner.key", "inner.namespace", "owner"),
    )


def crd_schema(model: ResourceClass) -> dict[str, Any]:
    schema: dict[str, Any] = crd(model)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def rules(node: dict[str, Any]) -> dict[str, str]:
    return {r["message"]: r["rule"] for r in node.get("x-kubernetes-validations", [])}


@pytest.mark.parametrize("model", [*KINDS, Widget], ids=lambda m: m.info.kind)
def test_schemas_are_structural(model: ResourceClass) -> None:
    assert structural_problems(crd_schema(model)) == []


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.info.kind)
def test_crd_shape(model: ResourceClass) -> None:
    info = model.info
    doc = crd(model)
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["metadata"]["name"] == f"{info.plural}.kflare.dev"
    assert doc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    spec = doc["spec"]
    assert spec["group"] == "kflare.dev"
    assert spec["scope"] == info.scope
    assert spec["names"]["categories"] == ["kflare"]
    assert spec["names"]["shortNames"] == list(info.short_names)
    assert spec["names"]["listKind"] == f"{info.kind}List"
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns[-3:]] == ["Ready", "Reason", "Age"]
    assert columns[-3]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns[-1] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    schema = version["schema"]["openAPIV3Schema"]
    assert schema["required"] == ["spec"]
    assert schema["description"]
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_reference_printer_columns() -> None:
    def names(model: ResourceClass) -> list[str]:
        return [c["name"] for c in crd(model)["spec"]["versions"][0]["additionalPrinterColumns"]]

    assert names(KINDS[0]) == ["Account ID", "Account Name", "Ready", "Reason", "Age"]
    assert names(Zone) == ["Domain", "Zone ID", "Plan", "CF Status", "Ready", "Reason", "Age"]
    assert names(DNSRecord) == ["Record Name", "Type", "Content", "Record ID", "Ready", "Reason", "Age"]
    assert names(WorkerScript) == ["Script", "Modified", "Ready", "Reason", "Age"]
    assert names(WorkerRoute) == ["Pattern", "Worker", "Route ID", "Ready", "Reason", "Age"]
    assert names(KVNamespace) == ["Title", "Namespace ID", "Ready", "Reason", "Age"]
    assert names(R2Bucket) == ["Bucket", "Location", "Ready", "Reason", "Age"]
    assert names(D1Database) == ["Database", "Database ID", "Ready", "Reason", "Age"]


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.info.kind)
def test_every_immutable_field_has_a_cel_rule(model: ResourceClass) -> None:
    spec = crd_schema(model)["properties"]["spec"]
    found = rules(spec)
    required = set(spec.get("required", []))
    for field in model.info.immutable:
        assert found[f"{field} is immutable"] == immutable_rule(field, required=field in required)


def test_cel_rules_stay_within_budget() -> None:
    """Everything a CEL rule reads is bounded, so the API server's cost estimate stays small."""
    models: list[ResourceClass] = [*KINDS, Widget]
    for model in models:
        spec = crd_schema(model)["properties"]["spec"]
        for field in model.info.immutable:
            *parents, leaf = field.split(".")
            node = spec
            for part in parents:
                node = node["properties"][part]
            assert unbounded(node["properties"][leaf], f"spec.{field}") == []


def test_ttl_rule() -> None:
    ttl = crd_schema(DNSRecord)["properties"]["spec"]["properties"]["ttl"]
    assert ttl["minimum"] == 1
    assert ttl["maximum"] == 86400
    assert rules(ttl) == {"ttl must be 1 (automatic) or between 30 and 86400": "self == 1 || self >= 30"}


def test_reference_schema_details() -> None:
    record = crd_schema(DNSRecord)["properties"]["spec"]
    assert record["required"] == ["zoneRef", "name", "type"]
    assert record["properties"]["name"]["minLength"] == 1
    assert len(record["properties"]["type"]["enum"]) == 21
    assert record["properties"]["data"] == {
        "type": "object",
        "description": record["properties"]["data"]["description"],
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert record["properties"]["zoneRef"]["x-kubernetes-map-type"] == "atomic"
    zone = crd_schema(Zone)["properties"]["spec"]["properties"]
    assert zone["plan"]["enum"] == ["free", "pro", "business", "enterprise"]
    assert zone["type"] == {**zone["type"], "enum": ["full", "partial"], "default": "full"}
    account = crd_schema(KINDS[0])["properties"]["spec"]["properties"]
    assert account["tokenSecretRef"]["properties"]["key"]["default"] == "CF_API_TOKEN"
    assert "x-kubernetes-validations" not in crd_schema(KINDS[0])["properties"]["spec"]


def test_free_form_only_where_declared() -> None:
    def free(node: dict[str, Any], path: str = "") -> list[str]:
        out = [path] if node.get("x-kubernetes-preserve-unknown-fields") else []
        for name, prop in node.get("properties", {}).items():
            out += free(prop, f"{path}.{name}")
        if "items" in node:
            out += free(node["items"], f"{path}[]")
        return out

    assert [p for m in KINDS for p in free(crd_schema(m))] == [".spec.data"]


class TestGenericConversion:
    def test_optional_immutable_fields_catch_adding_and_removing(self) -> None:
        spec = crd_schema(Widget)["properties"]["spec"]
        found = rules(spec)
        assert found["name is immutable"] == "self.name == oldSelf.name"
        assert found["locationHint is immutable"] == (
            "has(self.locationHint) == has(oldSelf.locationHint)"
            " && (!has(self.locationHint) || self.locationHint == oldSelf.locationHint)"
        )
        assert "self.__namespace__ == oldSelf.__namespace__" in found["namespace is immutable"]
        inner = rules(spec["properties"]["inner"])
        assert inner["inner.key is immutable"] == "self.key == oldSelf.key"
        assert "has(self.__namespace__)" in inner["inner.namespace is immutable"]
        paths = {r["message"]: r["fieldPath"] for r in spec["x-kubernetes-validations"]}
        assert paths["locationHint is immutable"] == ".locationHint"

    def test_model_checks_match_the_cel_rules(self) -> None:
        base = {"name": "w", "inner": {"key": "k"}, "mustBeThere": None}
        old = {"spec": base}
        assert [e.path for e in immutable_violations(Widget, old, {"spec": {**base, "locationHint": "weur"}})] == [
            "spec.locationHint"
        ]
        assert immutable_violations(Widget, old, {"spec": {**base, "port": "http"}}) == []
        assert validate_object(Widget, {"spec": {**base, "port": "http"}}) == []

    def test_conversions(self) -> None:
        props = crd_schema(Widget)["properties"]["spec"]["properties"]
        assert props["port"] == {"x-kubernetes-int-or-string": True, "default": 80}
        assert props["target"]["type"] == "object"
        assert props["target"]["properties"]["mode"]["enum"] == ["static", "expression"]
        assert set(props["target"]["properties"]) == {"mode", "value", "expression"}
        assert props["target"]["required"] == ["mode"]
        assert props["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
        assert props["flags"]["x-kubernetes-list-type"] == "set"
        assert "uniqueItems" not in props["flags"]
        assert props["blob"] == {"x-kubernetes-preserve-unknown-fields": True}
        assert props["settings"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        assert props["ratio"]["exclusiveMinimum"] is True
        assert props["ratio"]["minimum"] == 0
        assert props["ratio"]["exclusiveMaximum"] is True
        assert props["mustBeThere"]["nullable"] is True
        assert "nullable" not in props["locationHint"]
        assert props["name"]["description"] == "The widget's name."
        assert "title" not in props["name"]

    def test_descriptions_come_from_attribute_docstrings_of_the_class_and_its_bases(self) -> None:
        class Base(KflareModel):
            shared: str = ""
            """Said once, in the base."""

        class Derived(Base):
            own: int = 0
            """Said in the subclass."""
            given: str = Field("", description="Given explicitly.")
            """Not this one."""
            bare: str = ""

        props = structural_schema(Derived)["properties"]
        assert props["shared"]["description"] == "Said once, in the base."
        assert props["own"]["description"] == "Said in the subclass."
        assert props["given"]["description"] == "Given explicitly."
        assert "description" not in props["bare"]
        assert Derived.model_fields["own"].description is None  # read when rendering, not when the class is made

    def test_recursive_models_are_refused(self) -> None:
        class Node(KflareModel):
            children: list[Node] | None = None

        Node.model_rebuild()
        with pytest.raises(SchemaError, match="recursive"):
            structural_schema(Node)

    def test_unions_without_one_type_are_refused(self) -> None:
        class Mixed(KflareModel):
            value: int | bool

        with pytest.raises(SchemaError, match="no single type"):
            structural_schema(Mixed)

    def test_immutable_field_must_exist(self) -> None:
        class Broken(Resource[WidgetSpec, WidgetStatus]):
            """Broken."""

            info = KindInfo(kind="Broken", plural="brokens", immutable=("nope",))

        with pytest.raises(SchemaError, match=r"spec\.nope"):
            openapi_schema(Broken)

    def test_printer_column_must_exist(self) -> None:
        class Broken(Resource[WidgetSpec, WidgetStatus]):
            """Broken."""

            info = KindInfo(kind="Broken", plural="brokens", columns=(PrinterColumn("X", ".status.nope"),))

        with pytest.raises(SchemaError, match="printer column"):
            openapi_schema(Broken)

    def test_each_place_a_printer_column_reads_must_exist(self) -> None:
        class Broken(Resource[WidgetSpec, WidgetStatus]):
            """Broken."""

            info = KindInfo(kind="Broken", plural="brokens", columns=(PrinterColumn("X", ".spec['inner.key','nope']"),))

        with pytest.raises(SchemaError, match=r"points at \.spec\.nope"):
            openapi_schema(Broken)
        assert column_paths(".spec['inner.key','name']") == [".spec.inner.key", ".spec.name"]

    def test_cel_names(self) -> None:
        assert cel_field("name") == "name"
        assert cel_field("namespace") == "__namespace__"
        assert cel_field("x-y") == "x__dash__y"
        assert cel_field("a.b") == "a__dot__b"
        assert immutable_rule("type", required=True) == "self.type == oldSelf.type"


@functools.cache
def _rendered(helm: bool) -> tuple[tuple[str, str], ...]:
    return tuple(render_crds(helm=helm).items())


def rendered(helm: bool = True) -> dict[str, str]:
    """`render_crds(helm=helm)`, rendered once for the tests that only compare with it (a rendering takes a fifth
    of a second); `test_deterministic_and_ordered` renders afresh."""
    return dict(_rendered(helm))


class TestRendering:
    def test_deterministic_and_ordered(self) -> None:
        first, second = render_crds(), render_crds()
        assert first == second
        assert list(first) == sorted(first)
        assert set(first) == {crd_filename(m) for m in (*CRD_KINDS, *PACKAGE_KINDS)}
        # Plain manifests of kflare's kinds only: cloudflare-tunnel-gateway-controller's are apart.
        assert set(render_crds(helm=False)) == {crd_filename(m) for m in CRD_KINDS}
        assert set(render_package_crds()) == {crd_filename(m) for m in PACKAGE_KINDS}

    def test_helm_templates_are_plain_yaml_too(self) -> None:
        plain = {**rendered(helm=False), **render_package_crds()}
        for name, text in rendered().items():
            lines = text.splitlines()
            assert lines[0] == HEADER
            package = name.startswith("cf.k8s.lex.la_")
            # The package's kinds are installed only when asked (a cluster moving from it has them already).
            wanted = (
                "#{{- if .Values.gateway.tunnelGatewayPackage.crds }}" if package else "#{{- if .Values.crds.enabled }}"
            )
            assert lines[1] == wanted
            assert lines[-1] == "#{{- end }}"
            template_lines = [line for line in lines if "{{" in line]
            assert all(line.lstrip().startswith("#{{") for line in template_lines), name
            assert any("crds.keep" in line for line in template_lines)
            assert load_yaml(text) == load_yaml(plain[name])

    def test_the_packages_kinds_keep_their_group_and_names(self) -> None:
        for model in PACKAGE_KINDS:
            crd = load_yaml(render_package_crds()[crd_filename(model)])
            assert crd["metadata"]["name"] == f"{model.info.plural}.cf.k8s.lex.la"
            assert crd["spec"]["group"] == "cf.k8s.lex.la"
        schema = load_yaml(render_package_crds()["cf.k8s.lex.la_gatewayclassconfigs.yaml"])
        spec = schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert set(spec["properties"]) == {"cloudflareCredentialsSecretRef", "accountId", "tunnelID"}
        assert sorted(spec["required"]) == ["cloudflareCredentialsSecretRef", "tunnelID"]
        assert schema["spec"]["scope"] == "Cluster"

    def test_plain_manifests(self) -> None:
        for name, text in rendered(helm=False).items():
            assert text.startswith(HEADER + "\n")
            assert "{{" not in text
            doc = load_yaml(text)
            assert doc["kind"] == "CustomResourceDefinition", name

    def test_write_crds_replaces_stale_generated_files_only(self, tmp_path: Path) -> None:
        stale = tmp_path / "kflare.dev_gone.yaml"
        stale.write_text(HEADER + "\nkind: CustomResourceDefinition\n")
        foreign = tmp_path / "hand-written.yaml"
        foreign.write_text("kind: ConfigMap\n")
        paths = write_crds(tmp_path)
        assert [p.name for p in paths] == list(rendered())
        assert not stale.exists()
        assert foreign.exists()
        assert {p.name: p.read_text() for p in paths} == rendered()

    def test_main_write(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main_write(tmp_path / "out") == 0
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(rendered())
        assert "kflare.dev_dnsrecords.yaml" in capsys.readouterr().out

    def test_cli(self, tmp_path: Path) -> None:
        from app.cli import main

        assert main(["crds", "--out", str(tmp_path)]) == 0
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(rendered())
