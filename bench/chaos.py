"""The chaos scenarios of `make chaos` at full size (issue 14's figures: >= 200 kill points, and so on), and the
same table of figures at the end, read from build/chaos/figures-full.json.

Runs `pytest tests/chaos` with KFLARE_CHAOS_SCALE=full against the test control plane's binaries (as
`make test-bins` builds them). Arguments after `--` go to pytest (say `-- -k crashes`). Takes hours.

    .venv/bin/python bench/chaos.py [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.dev import default_bin_dir  # noqa: E402
from tests.chaos.figures import Figure, Figures  # noqa: E402

REPORT = ROOT / "build" / "chaos" / "figures-full.json"


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else argv
    bins = default_bin_dir()
    if bins is None:
        raise SystemExit("no kube-apiserver: run `make test-bins`")
    env = {**os.environ, "KFLARE_CHAOS_SCALE": "full", "K8S_TEST_BIN": str(bins)}
    REPORT.unlink(missing_ok=True)
    started = time.monotonic()
    # Full-size scenarios outlive the suite's per-test timeout; each sets its own.
    command = [sys.executable, "-m", "pytest", "tests/chaos", "-s", "-p", "no:cacheprovider", *extra]
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    minutes = (time.monotonic() - started) / 60
    if not REPORT.exists():
        print(f"no figures written ({REPORT}); pytest exited {done.returncode}")
        return done.returncode or 1
    figures = Figures([Figure(**row) for row in json.loads(REPORT.read_text())["figures"]])
    print(f"\nchaos figures, full size ({minutes:.0f} min; pytest exited {done.returncode}):\n")
    print(figures.table())
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
