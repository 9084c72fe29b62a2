"""The figures a chaos scenario records, and the table `make chaos` prints from them.

A scenario asserts its invariants (so a broken one fails the run) and records what it measured, so that the same
table comes out of the CI-sized run and of the full-sized one in `bench/chaos.py`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCALE = os.environ.get("KFLARE_CHAOS_SCALE", "ci")
if SCALE not in ("ci", "full"):
    raise RuntimeError(f"KFLARE_CHAOS_SCALE must be ci or full, not {SCALE!r}")


def size(ci: int, full: int) -> int:
    """A scenario's size: `ci` in `make chaos`, `full` in the long form."""
    return full if SCALE == "full" else ci


@dataclass(frozen=True)
class Figure:
    scenario: str
    figure: str
    value: str
    target: str
    ok: bool


@dataclass
class Figures:
    rows: list[Figure] = field(default_factory=list)

    def record(self, scenario: str, figure: str, value: object, *, target: str = "", ok: bool = True) -> None:
        """One line of the table. `target` is what must hold (say "0", "<= 15 s"); `ok` whether it did."""
        text = f"{value:.3g}" if isinstance(value, float) else str(value)
        self.rows.append(Figure(scenario, figure, text, target, ok))

    def table(self) -> str:
        header = ("scenario", "figure", "value", "target", "")
        lines = [header, *((r.scenario, r.figure, r.value, r.target, "ok" if r.ok else "FAILED") for r in self.rows)]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        out = [" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in lines]
        out.insert(1, "-+-".join("-" * w for w in widths))
        return "\n".join(out)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"scale": SCALE, "figures": [asdict(r) for r in self.rows]}, indent=2) + "\n")


FIGURES = Figures()
