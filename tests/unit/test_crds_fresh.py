"""The CRDs checked into the chart are exactly what the models generate."""

from __future__ import annotations

from app.api.crds import DEFAULT_DIRECTORY, HEADER, render_crds


def test_checked_in_crds_are_fresh() -> None:
    expected = render_crds()
    on_disk = {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(DEFAULT_DIRECTORY.glob("*.yaml"))
        if path.read_text(encoding="utf-8").startswith(HEADER)
    }
    stale = sorted(name for name in expected.keys() | on_disk.keys() if expected.get(name) != on_disk.get(name))
    assert not stale, (
        f"the CRDs in {DEFAULT_DIRECTORY} differ from the models ({', '.join(stale)}): run `kflare crds` "
        "and commit the result"
    )
