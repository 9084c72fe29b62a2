"""What a `kflare run` process loads at start, and what it skips at exit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.heavy


def test_a_process_without_the_gateway_class_loads_neither_the_class_nor_grpc() -> None:
    """The Gateway class, gRPC and Envoy's messages are imported when `--gateway-enabled` starts the class: a process
    that manages only Cloudflare resources does not pay their start time and memory."""
    probe = (
        "import json, sys; import app.cli, app.server;"
        " print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'envoy')"
        " or m in ('app.xds', 'reconcilers.gateway.controller'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == []


def test_a_process_skips_the_last_collection_at_exit() -> None:
    """The heap is frozen when the interpreter exits, so its last collection does not walk it (a handler registered
    before `main` runs after those `main` registers)."""
    probe = (
        "import atexit, gc; atexit.register(lambda: print(gc.get_freeze_count() > 0));"
        " from app.cli import main; main(['version'])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "True"
