"""Golden files of the xDS stage alone: `testdata/xds/<case>.in.yaml` (the IR's planes, as the Gateway API stage
leaves them) to `<case>.out.yaml` (every plane's xDS resources), so that the xDS stage is tested without the Gateway
API objects, and a change to either stage shows in the files of that stage.

An input holds, per plane ("shared" or a Gateway's own plane's xDS cluster), its `virtual_hosts` (each hostname's
routes, `RouteIR` written field by field, a field at its default left out; an action or a path change is written
under its kind: `{Forward: {...}}`), its `clusters` and `endpoints` (Envoy's JSON already) and `own`.

The inputs are the IR of the golden cases of the same name (`testdata/<case>.in.yaml`), which
`test_the_inputs_are_the_gateway_api_stages_output` holds them to, and the outputs are those cases' `xds`. After an
intended change, regenerate both and read their diff:

    KFLARE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/gateway/test_xds_golden.py -q
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union

import pytest
import yaml
from pydantic import JsonValue

from reconcilers.gateway import xds
from reconcilers.gateway.ir import PlaneIR
from reconcilers.gateway.translate import translate
from tests.unit.gateway.test_golden import load

JSON = dict[str, Any]
TESTDATA = Path(__file__).parent / "testdata"
XDS_TESTDATA = TESTDATA / "xds"
UPDATE = os.environ.get("KFLARE_UPDATE_GOLDEN") == "1"
CASES = ["filters", "grpc-route", "http-and-https", "own-plane", "redirect-on-port-8080", "weighted-backends"]
SHARED = "shared"


def _union_args(hint: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return typing.get_args(hint)
    return None


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def to_plain(value: Any, hint: Any) -> Any:
    """`value` (of type `hint`) as YAML's values."""
    union = _union_args(hint)
    if union is not None:
        if value is None:
            return None
        kinds = [a for a in union if a is not type(None)]
        if len(kinds) == 1:
            return to_plain(value, kinds[0])
        return {type(value).__name__: to_plain(value, type(value))}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        hints = typing.get_type_hints(type(value))
        return {
            f.name: to_plain(getattr(value, f.name), hints[f.name])
            for f in dataclasses.fields(value)
            if getattr(value, f.name) != _default(f)
        }
    origin = typing.get_origin(hint)
    if origin in (tuple, list, Sequence):
        args = typing.get_args(hint)
        item = args[0] if args else Any
        return [to_plain(v, item) for v in value]
    if origin in (dict, Mapping):
        return {k: to_plain(v, typing.get_args(hint)[1]) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value


def from_plain(value: Any, hint: Any) -> Any:
    """YAML's values as a `hint`: the inverse of `to_plain`."""
    union = _union_args(hint)
    if union is not None:
        if value is None:
            return None
        kinds = [a for a in union if a is not type(None)]
        if len(kinds) == 1:
            return from_plain(value, kinds[0])
        ((name, body),) = value.items()
        (kind,) = [k for k in kinds if k.__name__ == name]
        return from_plain(body, kind)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(**{k: from_plain(v, hints[k]) for k, v in value.items()})
    if hint is Any or hint is JsonValue:
        return value
    origin = typing.get_origin(hint)
    if origin is tuple:
        return tuple(from_plain(v, typing.get_args(hint)[0]) for v in value)
    if origin in (list, Sequence):
        return [from_plain(v, typing.get_args(hint)[0]) for v in value]
    if origin in (dict, Mapping):
        return {k: from_plain(v, typing.get_args(hint)[1]) for k, v in value.items()}
    if origin is Literal or hint in (int, str, bool):
        return value
    raise AssertionError(f"no reading of {hint!r}")


def _named(plane: str) -> str:
    return plane or SHARED


def planes_of_yaml(text: str) -> dict[str, PlaneIR]:
    return {"" if name == SHARED else name: from_plain(plane, PlaneIR) for name, plane in yaml.safe_load(text).items()}


def planes_as_yaml(planes: Mapping[str, PlaneIR]) -> str:
    out = {_named(name): to_plain(plane, PlaneIR) for name, plane in planes.items()}
    return yaml.safe_dump(out, sort_keys=True, width=120, default_flow_style=False)


def resources_as_yaml(planes: Mapping[str, PlaneIR]) -> str:
    out = {_named(name): resources for name, resources in xds.planes(planes).items()}
    return yaml.safe_dump(out, sort_keys=True, width=120, default_flow_style=False)


@pytest.mark.parametrize("case", CASES)
def test_xds_golden(case: str) -> None:
    source, golden = XDS_TESTDATA / f"{case}.in.yaml", XDS_TESTDATA / f"{case}.out.yaml"
    if UPDATE:
        source.parent.mkdir(exist_ok=True)
        source.write_text(planes_as_yaml(translate(load(case)).ir.planes))
        golden.write_text(resources_as_yaml(planes_of_yaml(source.read_text())))
    assert golden.exists(), f"{golden.name} is missing: KFLARE_UPDATE_GOLDEN=1 writes it"
    assert resources_as_yaml(planes_of_yaml(source.read_text())) == golden.read_text(), f"{case} differs"


@pytest.mark.parametrize("case", CASES)
def test_the_inputs_are_the_gateway_api_stages_output(case: str) -> None:
    """The IR of the golden case of the same name, read back as it was written: the files stay true to the Gateway
    API stage, and the reading loses nothing."""
    planes = translate(load(case)).ir.planes
    source = (XDS_TESTDATA / f"{case}.in.yaml").read_text()
    assert planes_as_yaml(planes) == source
    assert planes_of_yaml(source) == dict(planes)


@pytest.mark.parametrize("case", CASES)
def test_the_outputs_are_the_translations(case: str) -> None:
    """The xDS stage alone gives what the whole translation gives for the same case."""
    whole = yaml.safe_load((TESTDATA / f"{case}.out.yaml").read_text())["xds"]
    assert yaml.safe_load((XDS_TESTDATA / f"{case}.out.yaml").read_text()) == whole
