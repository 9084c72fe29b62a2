"""Running helm on the chart and reading what it renders."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api.registry import CONFIGURATION_KINDS, INTERNAL_KINDS
from app.controlplane import bin_dir_from_env

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "chart" / "kflare"
CRD_DIR = CHART / "templates" / "crds"


HELMS = ("helm", "helm4")
"""Helm 3 and Helm 4, as hack/test-bins.sh names them: every chart test runs with both (but `ONE_HELM`'s)."""
ONE_HELM = pytest.mark.parametrize("helm", HELMS[-1:], indirect=True)
"""For a test of what the installed chart lets kflare do, not of how helm installs it: both majors render the same
objects (test_render.py, `test_both_helms_render_the_same_objects`), so running kflare under each would test one
thing twice. Installing, upgrading and uninstalling run with both."""


def helm_binary(name: str = "helm") -> Path:
    """helm (or helm4) from the test binaries (K8S_TEST_BIN or KUBEBUILDER_ASSETS), as the control plane fixture
    finds them."""
    bins = bin_dir_from_env()
    if bins is not None and (bins / name).exists():
        return bins / name
    message = f"no {name}: set K8S_TEST_BIN (`make test` does) or KUBEBUILDER_ASSETS"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def helm_env(home: Path) -> dict[str, str]:
    """helm's environment: its config, cache and data under `home`, so tests touch nothing of the user's."""
    env = os.environ.copy()
    for name in ("CONFIG", "CACHE", "DATA"):
        env[f"HELM_{name}_HOME"] = str(home / name.lower())
    return env


@dataclass
class Helm:
    binary: Path
    home: Path

    def run(self, *args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=helm_env(self.home),
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def values_args(self, values: Mapping[str, Any] | None, name: str = "values") -> list[str]:
        if not values:
            return []
        path = self.home / f"{name}-{uuid.uuid4().hex[:8]}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
        return ["-f", str(path)]

    def template(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = "kflare",
        namespace: str = "kflare-system",
        args: Sequence[str] = (),
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        return self.run(
            "template", release, str(CHART), "--namespace", namespace, *self.values_args(values), *args, check=check
        )

    def render(self, values: Mapping[str, Any] | None = None, **kwargs: Any) -> Rendered:
        return Rendered.parse(self.template(values, **kwargs).stdout)


@dataclass
class Rendered:
    """The documents `helm template` printed."""

    docs: list[dict[str, Any]]

    @classmethod
    def parse(cls, text: str) -> Rendered:
        return cls([doc for doc in yaml.safe_load_all(text) if doc])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.docs)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def find(self, kind: str, name: str | None = None) -> dict[str, Any] | None:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) <= 1, f"{len(found)} {kind} {name or ''}"
        return found[0] if found else None

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = self.find(kind, name)
        assert found is not None, f"no {kind} {name or ''} in {sorted(self.kinds)}"
        return found

    @property
    def kinds(self) -> set[str]:
        return {d["kind"] for d in self.docs}

    @property
    def deployment(self) -> dict[str, Any]:
        return self.one("Deployment")

    @property
    def pod(self) -> dict[str, Any]:
        return dict(self.deployment["spec"]["template"]["spec"])

    @property
    def container(self) -> dict[str, Any]:
        (container,) = self.pod["containers"]
        return dict(container)

    @property
    def args(self) -> list[str]:
        return list(self.container["args"])

    def flag(self, name: str) -> str | None:
        """The value of `--name=value` in the manager's args (the last one wins, as for the parser)."""
        value = None
        for arg in self.args:
            if arg.startswith(f"--{name}="):
                value = arg.split("=", 1)[1]
        return value


def crd_plurals() -> dict[str, str]:
    """plural -> scope of every CRD the chart carries of a reconciled kind (the configuration kinds, read by the
    reconcile that uses them, are neither admitted nor written: the Gateway class's role reads GatewayParameters;
    the claims are kflare's alone, neither admitted nor in any role but the controller's)."""
    configuration = {model.info.plural for model in (*CONFIGURATION_KINDS, *INTERNAL_KINDS)}
    found = {}
    # kflare.dev's only: cloudflare-tunnel-gateway-controller's kinds are read, never admitted nor written.
    for path in sorted(CRD_DIR.glob("kflare.dev_*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc["spec"]["names"]["plural"] not in configuration:
            found[doc["spec"]["names"]["plural"]] = doc["spec"]["scope"]
    return found
