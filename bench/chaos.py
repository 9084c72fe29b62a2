"""The chaos scenarios of `make chaos` at full size (issue 14's figures: >= 200 kill points, and so on), and the
same table of figures at the end, read from the report the run writes (build/chaos/figures-full.json).

Runs `pytest tests/chaos` with KFLARE_CHAOS_SCALE=full against the test control plane's binaries (as
`make test-bins` builds them). Arguments after `--` go to pytest (say `-- -k crashes`). Takes hours; `--scale ci`
runs the sizes of `make chaos` instead. With `KFLARE_BENCH_PLANE` set (see bench/harness.py), the scenarios run on
that plane, emptied first, instead of one of their own; it keeps no audit log, so only those that read none pass.
With `KFLARE_BENCH_EMULATOR` set, they use that emulator too.

    .venv/bin/python bench/chaos.py [--scale full] [--report PATH] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.controlplane import ControlPlane
from bench.harness import SHARED_PLANE, bin_dir, empty
from tests.chaos.figures import Figure, Figures

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    ours, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=("ci", "full"), default="full", help="scenario sizes (default: full)")
    parser.add_argument("--report", type=Path, help="where the figures go (default: build/chaos/figures-SCALE.json)")
    args = parser.parse_args(ours)
    report = (args.report or ROOT / "build" / "chaos" / f"figures-{args.scale}.json").resolve()
    env = {
        **os.environ,
        "KFLARE_CHAOS_SCALE": args.scale,
        "KFLARE_CHAOS_REPORT": str(report),
        "K8S_TEST_BIN": str(bin_dir()),
    }
    report.unlink(missing_ok=True)
    started = time.monotonic()
    if shared := os.environ.get(SHARED_PLANE):
        empty(ControlPlane(bin_dir=Path(env["K8S_TEST_BIN"]), workdir=Path(shared)))
    # Full-size scenarios outlive the suite's per-test timeout; each sets its own. The scenarios use neither
    # Hypothesis nor Schemathesis, whose plugins take pytest a second or two to load.
    plugins = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:schemathesis")
    command = [sys.executable, "-m", "pytest", "tests/chaos", "-s", *plugins, *extra]
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    minutes = (time.monotonic() - started) / 60
    if not report.exists():
        print(f"no figures written ({report}); pytest exited {done.returncode}")
        return done.returncode or 1
    figures = Figures([Figure(**row) for row in json.loads(report.read_text())["figures"]])
    print(f"\nchaos figures, {args.scale} size ({minutes:.0f} min; pytest exited {done.returncode}):\n")
    print(figures.table())
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
