"""The CRDs checked in, the chart's templates and the plain manifests of config/crd/bases (for installs with
`crds.enabled=false`), are exactly what the models generate."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.api.crds import CHART_KINDS, DEFAULT_DIRECTORY, HEADER, PLAIN_DIRECTORY, render_chart_kinds, render_crds


@pytest.mark.parametrize(("directory", "helm"), [(DEFAULT_DIRECTORY, True), (PLAIN_DIRECTORY, False)])
def test_checked_in_crds_are_fresh(directory: Path, helm: bool) -> None:
    expected = render_crds(helm=helm)
    on_disk = {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(directory.glob("*.yaml"))
        if path.read_text(encoding="utf-8").startswith(HEADER)
    }
    stale = sorted(name for name in expected.keys() | on_disk.keys() if expected.get(name) != on_disk.get(name))
    assert not stale, (
        f"the CRDs in {directory} differ from the models ({', '.join(stale)}): run `kflare crds` and commit the result"
    )


def test_the_charts_kind_list_is_fresh() -> None:
    """The chart's RBAC and webhooks range over the plurals `kflare crds` writes: a kind is never listed by hand."""
    assert CHART_KINDS.read_text(encoding="utf-8") == render_chart_kinds(), (
        f"{CHART_KINDS} differs from the models: run `kflare crds` and commit the result"
    )
