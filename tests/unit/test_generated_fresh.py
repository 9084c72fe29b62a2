"""What `kflare generate` writes besides the CRDs, the API reference and the OpenAPI documents (each checked by a
test of its own) is as the kinds declare it: the deploy guide's table of token permissions, and the reconcilers'
kinds layer of the import contracts."""

from __future__ import annotations

from app.api.docs import GUIDE, guide_with_table
from app.generate import PYPROJECT, kind_modules, pyproject_with_layers


def test_the_deploy_guide_lists_the_token_permissions_the_kinds_declare() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    assert guide_with_table(text) == text, "the deploy guide's token permissions are stale: run `kflare generate`"


def test_every_module_with_a_kind_s_reconciler_has_its_layer() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    assert pyproject_with_layers(text) == text, "pyproject.toml's kinds layer is stale: run `kflare generate`"
    assert {"storage", "rules", "zone"} <= set(kind_modules())
