"""The API reference checked into docs/api is exactly what the models generate, and shows a sample of every kind."""

from __future__ import annotations

import functools

from app.api.docs import DEFAULT_DIRECTORY, HEADER, render_docs
from app.api.registry import KINDS


@functools.cache
def _rendered() -> tuple[tuple[str, str], ...]:
    return tuple(render_docs().items())


def rendered() -> dict[str, str]:
    """`render_docs()`, rendered once for both tests (it reads every example: most of a second)."""
    return dict(_rendered())


def test_checked_in_api_reference_is_fresh() -> None:
    expected = rendered()
    on_disk = {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(DEFAULT_DIRECTORY.glob("*.md"))
        if path.read_text(encoding="utf-8").startswith(HEADER)
    }
    stale = sorted(name for name in expected.keys() | on_disk.keys() if expected.get(name) != on_disk.get(name))
    assert not stale, (
        f"the API reference in {DEFAULT_DIRECTORY} differs from the models ({', '.join(stale)}): run `kflare docs` "
        "and commit the result"
    )


def test_every_kind_has_a_page_with_an_example() -> None:
    pages = rendered()
    for model in KINDS:
        text = pages[f"{model.info.plural}.md"]
        assert f"# {model.info.kind}\n" in text
        assert "## Example" in text, f"examples/ has no {model.info.kind}"
        assert f"kind: {model.info.kind}\n" in text
        assert f"[{model.info.kind}]({model.info.plural}.md)" in pages["README.md"]
        for path in model.info.immutable:
            assert f"`spec.{path}`" in text
