"""`kflare openapi`: the OpenAPI documents of the process' HTTP listeners and of the Cloudflare emulator, written
to `openapi/*.json` in a source checkout (checked in, and compared with the code by the tests).

The documents are rendered deterministically (sorted keys, two-space indent, a final newline), so regenerating an
unchanged app leaves the files byte for byte as they were.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from fastapi import FastAPI

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
DEFAULT_DIRECTORY: Final = REPO_ROOT / "openapi"
NAMES: Final = ("probes", "webhooks", "metrics", "emulator")
"""Every document this command may write, as `<name>.json`."""


def _probes() -> FastAPI:
    from app.server import Runtime, probes_app
    from app.settings import Settings

    return probes_app(Runtime(Settings.model_construct()))


def _webhooks() -> FastAPI:
    from webhooks.app import create_app

    return create_app()


def _metrics() -> FastAPI:
    from app.metrics.authz import Authorizer, KubeReviewer
    from app.metrics.listener import create_app

    # The default listener: `--metrics-secure`. The reviewer is never called: no request is served.
    return create_app(Authorizer(KubeReviewer(lambda: None)))


def _emulator() -> FastAPI:
    from app.emulator.app import create_app

    return create_app()


APPS: Final[dict[str, Callable[[], FastAPI]]] = {
    "probes": _probes,
    "webhooks": _webhooks,
    "metrics": _metrics,
    "emulator": _emulator,
}


def render(document: Mapping[str, object]) -> str:
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def documents() -> dict[str, str]:
    """`<name>.json` -> rendered document, for every listener whose app this build has."""
    rendered: dict[str, str] = {}
    for name, factory in APPS.items():
        try:
            app = factory()
        except ImportError as exc:  # a listener this build does not have
            print(f"kflare openapi: skipping {name}: {exc}", file=sys.stderr)
            continue
        rendered[f"{name}.json"] = render(app.openapi())
    return rendered


def write(directory: Path) -> list[Path]:
    """Write the documents into `directory`; remove a document of ours that is no longer generated."""
    directory.mkdir(parents=True, exist_ok=True)
    rendered = documents()
    written = []
    for filename, text in rendered.items():
        path = directory / filename
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    for name in NAMES:
        stale = directory / f"{name}.json"
        if stale.name not in rendered and stale.exists():
            stale.unlink()
    return written


def main_write(directory: Path | None = None) -> int:
    """`kflare openapi`: by default into `openapi/` of this checkout."""
    if directory is None:
        if not (REPO_ROOT / "pyproject.toml").is_file():
            print("kflare openapi: not running from a source checkout; pass --out DIR", file=sys.stderr)
            return 2
        directory = DEFAULT_DIRECTORY
    for path in write(directory):
        print(path)
    return 0
