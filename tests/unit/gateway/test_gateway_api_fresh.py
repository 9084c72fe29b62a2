"""The checked-in shapes of the Gateway API objects are what the pinned CRDs' schemas generate."""

from __future__ import annotations

from app.gateway_api_shapes import TARGET, crd_directory, render, schemas


def test_the_gateway_api_shapes_are_fresh() -> None:
    expected = render(schemas(crd_directory()))
    assert TARGET.read_text(encoding="utf-8") == expected, (
        f"{TARGET} differs from the Gateway API CRDs: run `python -m app.gateway_api_shapes` and commit the result"
    )
