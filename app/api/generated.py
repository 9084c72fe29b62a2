"""Writing generated files (CRDs, the API reference) into a directory, and the `kflare` command that does it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from app.api.schema import SchemaError


def write_files(directory: Path, rendered: Mapping[str, str], pattern: str, header: str) -> list[Path]:
    """Write `rendered` (text by file name) into `directory`, touching only files whose text changed, and drop the
    generated files (those matching `pattern` that start with `header`) no longer rendered; the files' paths."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in sorted(directory.glob(pattern)):
        if stale.name not in rendered and stale.read_text(encoding="utf-8").startswith(header):
            stale.unlink()
    paths: list[Path] = []
    for name, text in rendered.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def main_write(
    command: str, directory: Path | None, default: Path, repo_root: Path, write: Callable[[Path], list[Path]]
) -> int:
    """`kflare <command>`: write into `directory`, by default `default` in this checkout; prints each path."""
    if directory is None:
        if not (repo_root / "pyproject.toml").is_file():
            print(f"kflare {command}: not running from a source checkout; pass --out DIR", file=sys.stderr)
            return 2
        directory = default
    try:
        paths = write(directory)
    except SchemaError as exc:
        print(f"kflare {command}: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0
