"""What a `kflare run` process loads at start."""

from __future__ import annotations

import json
import subprocess
import sys


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
