"""Go tools the tests run (promtool, actionlint, syft), built once from the Go module proxy by hack/go-tools.sh."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def go_tool(name: str) -> Path:
    """The tool's path; the first call on a machine builds it (minutes: give the test a long timeout)."""
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "go-tools.sh"), name], capture_output=True, text=True, timeout=1800, check=False
    )
    assert done.returncode == 0, f"hack/go-tools.sh {name} failed:\n{done.stderr[-3000:]}"
    return Path(done.stdout.strip().splitlines()[-1])
