"""`kflare generate`: every file derived from the kinds' declarations, written in one go.

A kind is its model (`app/api`), its reconciler (`reconcilers/`), its emulated Cloudflare collection
(`app/emulator/kinds/`) and its example (`examples/`); what follows from them is checked in and written here: the
CRDs and the chart's kind list (`kflare crds`), the API reference and the deploy guide's token permissions
(`kflare docs`), the OpenAPI documents (`kflare openapi`) and the reconcilers' kinds layer of the import contracts
in `pyproject.toml` (below). A test fails for each of them when it is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Final

from app.api import crds, docs
from app.api.crds import REPO_ROOT

PYPROJECT: Final = REPO_ROOT / "pyproject.toml"
KINDS_LAYER_MARK: Final = "# The kinds' modules (written by `kflare generate`: every module with a kind's reconciler):"
_KINDS_LAYER: Final = re.compile(rf"({re.escape(KINDS_LAYER_MARK)}\n)(\s*)\"[^\"\n]*\",\n")


def kind_modules() -> tuple[str, ...]:
    """The modules of `reconcilers` that hold a kind's reconciler, by name."""
    from reconcilers.registry import KINDS

    return tuple(sorted({kind.__module__.removeprefix("reconcilers.") for kind in KINDS}))


def pyproject_with_layers(text: str) -> str:
    """`pyproject.toml`'s text with the reconcilers' kinds layer naming every module with a kind's reconciler."""
    if not _KINDS_LAYER.search(text):
        raise ValueError(f"pyproject.toml has no line after {KINDS_LAYER_MARK!r}")
    layer = " | ".join(kind_modules())
    return _KINDS_LAYER.sub(lambda m: f'{m.group(1)}{m.group(2)}"{layer}",\n', text, count=1)


def write_layers(path: Path = PYPROJECT) -> Path:
    text = path.read_text(encoding="utf-8")
    if pyproject_with_layers(text) != text:
        path.write_text(pyproject_with_layers(text), encoding="utf-8")
    return path


def main_write() -> int:
    """Write every generated file of this checkout; 0 if all went well."""
    if not PYPROJECT.is_file():
        print("kflare generate: not running from a source checkout", file=sys.stderr)
        return 2
    from app import openapi

    for step in (crds.main_write, docs.main_write, openapi.main_write):
        status = step()
        if status:
            return status
    print(write_layers())
    return 0
