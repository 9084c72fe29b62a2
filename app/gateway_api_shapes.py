"""`python -m app.gateway_api_shapes`: the TypedDicts of the Gateway API objects the Gateway class reads, from the
OpenAPI v3 schemas of their CRDs (the experimental channel, a superset of the standard one), written to
`reconcilers/gateway/gateway_api.py` in a source checkout (checked in, and compared with the CRDs by a test).

The CRDs come from `hack/gateway-api-crds.sh` (the pinned Gateway API release, cached outside the repository). A
shape the schemas repeat under the same field (a route's parent references, its status) is declared once, named by the
first path it appears at: the module stays readable, and TypedDicts being structural, the others fit it all the same.
"""

from __future__ import annotations

import json
import keyword
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
TARGET: Final = REPO_ROOT / "reconcilers" / "gateway" / "gateway_api.py"
KINDS: Final = (
    *("GatewayClass", "Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "BackendTLSPolicy"),
)
"""The kinds the class reads, in the order their shapes are named (the first path of a repeated shape names it)."""
VERSION: Final = "v1"

Schema = Mapping[str, object]

_HEADER: Final = '''"""The Gateway API objects the Gateway class reads, as TypedDicts of the JSON the caches hold:
generated from the OpenAPI v3 schemas of the experimental channel's CRDs (version {version}). Do not edit:
regenerate with `python -m app.gateway_api_shapes` (a test fails while this module is stale).

A shape the schemas repeat under the same field is declared once, named by the first path it appears at.
`metadata` is the Kubernetes ObjectMeta the CRDs leave untyped, and always present.
"""

# Evaluated annotations (no `from __future__ import annotations`): a shape's `__required_keys__` then holds its
# `Required` keys, which the caches check their objects by.
from typing import Literal, Required, TypedDict


class ObjectMeta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    resourceVersion: str
    uid: str
    finalizers: list[str]
'''


def crd_directory() -> Path:
    """The experimental channel's CRDs, fetched (once per version) by `hack/gateway-api-crds.sh`."""
    env = {**os.environ, "PYTHON": sys.executable}
    script = REPO_ROOT / "hack" / "gateway-api-crds.sh"
    out = subprocess.run(["bash", str(script)], check=True, capture_output=True, text=True, env=env)
    return Path(out.stdout.strip().splitlines()[-1]) / "experimental"


def schemas(directory: Path) -> dict[str, Schema]:
    """Each kind's schema at `VERSION`, by kind."""
    found: dict[str, Schema] = {}
    for path in sorted(directory.glob("gateway.networking.k8s.io_*.yaml")):
        # libyaml's loader where the wheel has it: the CRDs are 2 MB of YAML, read by a unit test on every run.
        loader = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
        for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            kind = doc["spec"]["names"]["kind"]
            for version in doc["spec"]["versions"]:
                if kind in KINDS and version["name"] == VERSION and version.get("served"):
                    found[kind] = version["schema"]["openAPIV3Schema"]
    missing = [kind for kind in KINDS if kind not in found]
    if missing:
        raise ValueError(f"no served {VERSION} schema in {directory} for {', '.join(missing)}")
    return found


@dataclass
class _Module:
    """The classes rendered so far, in dependency order, and the name each distinct body got."""

    classes: list[str] = field(default_factory=list)
    by_body: dict[tuple[str, str], str] = field(default_factory=dict)

    def type_of(self, schema: Schema, path: str, leaf: str) -> str:
        if schema.get("x-kubernetes-int-or-string"):
            return "int | str"
        kind = schema.get("type")
        if kind == "array":
            items = schema.get("items")
            return f"list[{self.type_of(items, path, leaf) if isinstance(items, Mapping) else 'object'}]"
        if kind == "object":
            properties = schema.get("properties")
            if isinstance(properties, Mapping) and properties:
                return self.declare(path, leaf, properties, schema.get("required"))
            values = schema.get("additionalProperties")
            return f"dict[str, {self.type_of(values, path, leaf) if isinstance(values, Mapping) else 'object'}]"
        if kind == "string":
            enum = schema.get("enum")
            if isinstance(enum, list) and enum:
                return f"Literal[{', '.join(json.dumps(value) for value in enum)}]"
            return "str"
        return {"integer": "int", "number": "float", "boolean": "bool"}.get(str(kind), "object")

    def declare(
        self, path: str, leaf: str, properties: Mapping[str, Schema], required: object, top: bool = False
    ) -> str:
        wanted = set(required) if isinstance(required, list) else set()
        fields: list[tuple[str, str]] = []
        for key, schema in properties.items():
            if top and key == "metadata":
                fields.append((key, "Required[ObjectMeta]"))
                continue
            type_ = self.type_of(schema, path + key[:1].upper() + key[1:], key)
            fields.append((key, f"Required[{type_}]" if key in wanted else type_))
        if all(k.isidentifier() and not keyword.iskeyword(k) for k, _ in fields):
            body = "".join(f"    {k}: {t}\n" for k, t in fields)
            text = f"class {{name}}(TypedDict, total=False):\n{body}"
        else:
            # A key that is not an identifier (`from`) is only declared by the functional syntax.
            body = "".join(f"        {json.dumps(k)}: {t},\n" for k, t in fields)
            text = f'{{name}} = TypedDict(\n    "{{name}}",\n    {{{{\n{body}    }}}},\n    total=False,\n)\n'
        # Alike under the same field only: a Gateway's parent and a listener's certificate are both a bare reference.
        seen = (leaf, text)
        if not top and seen in self.by_body:
            return self.by_body[seen]
        self.by_body.setdefault(seen, path)
        self.classes.append(text.format(name=path))
        return path


def render(found: Mapping[str, Schema]) -> str:
    """The module's text, formatted as `ruff format` leaves it."""
    module = _Module()
    for kind in KINDS:
        schema = found[kind]
        properties = schema.get("properties")
        assert isinstance(properties, Mapping)
        module.declare(kind, kind, properties, schema.get("required"), top=True)
    text = _HEADER.format(version=VERSION) + "".join(f"\n\n{c}" for c in module.classes)
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    return formatted.stdout


def main() -> int:
    if not TARGET.parent.is_dir():
        print("gateway_api_shapes: not running from a source checkout", file=sys.stderr)
        return 2
    TARGET.write_text(render(schemas(crd_directory())), encoding="utf-8")
    print(TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
