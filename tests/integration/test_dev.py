"""`kflare dev --once`: the embedded default converges on one machine, with no cluster and no Cloudflare account."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def test_kflare_dev_once_converges_the_examples(control_plane: ControlPlane) -> None:
    kflare = Path(sys.executable).with_name("kflare")
    done = subprocess.run(
        [str(kflare), "dev", "--once", "--timeout", "90", "--bin-dir", str(control_plane.bin_dir)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all resources are Ready" in done.stdout
    final = done.stdout.rsplit("KIND", 1)[1]
    rules = ("block-admin", "login", "free-managed", "old-api", "security-headers", "www-to-apex", "static-assets")
    rules = (*rules, "api-settings", "admin-port", "office-networks")
    records = ("demo-account", "example-com", "www", "mx-primary", "mx-backup", "sip-srv", "caa", "api-cache", "api")
    for name in (*records, *rules):
        assert name in final
    # examples/expose-a-service: the Zone, the Tunnel, its configuration and the record pointing at it.
    for kind, name in [
        ("Zone", "example-net"),
        ("Tunnel", "web"),
        ("TunnelConfiguration", "web"),
        ("DNSRecord", "app"),
    ]:
        assert any(line.split()[:3] == [kind, "web", name] for line in final.splitlines()), (kind, name)
    # examples/gateway, when kflare dev serves the Gateway class: the DNSRecord the class made for its route.
    if "Gateway class cloudflare-tunnel" in done.stdout:
        assert any(
            line.split()[:4] == ["DNSRecord", "demo", "gw.hello.example.com", "True"] for line in final.splitlines()
        )
    assert "False" not in final


def test_kflare_dev_once_fails_with_the_table_when_resources_cannot_converge(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(
        """
apiVersion: kflare.dev/v1alpha1
kind: CloudflareAccount
metadata:
  name: wrong-account
spec:
  accountID: ffffffffffffffffffffffffffffffff
  tokenSecretRef: {name: cloudflare-api-token, namespace: kflare-system}
"""
    )
    kflare = Path(sys.executable).with_name("kflare")
    done = subprocess.run(
        [
            str(kflare),
            "dev",
            "--once",
            "--timeout",
            "5",  # from the apply on: the table lists the account at once, and it never becomes Ready
            "--apply",
            str(tmp_path),
            "--bin-dir",
            str(control_plane.bin_dir),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 1
    assert "wrong-account" in done.stdout
    assert "not all resources were Ready" in done.stderr


def running_under(workdir: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", workdir], capture_output=True, text=True, check=False)
    return found.stdout.split()


@dataclass
class Dev:
    """A running `kflare dev` and what it printed."""

    proc: subprocess.Popen[str]
    lines: list[str]
    reader: threading.Thread
    kubeconfig: str
    metrics_command: str

    def line(self, prefix: str, timeout: float = 60) -> tuple[int, str]:
        """The first line it printed that starts with `prefix` (and its index), waiting for it up to `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            found = next(((i, line) for i, line in enumerate(self.lines) if line.startswith(prefix)), None)
            if found is not None:
                return found
            assert self.proc.poll() is None, "".join(self.lines)
            assert time.monotonic() < deadline, f"no {prefix!r}:\n" + "".join(self.lines)
            time.sleep(0.1)  # the reader thread appends as kflare dev prints

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        binary = self.metrics_command.split("$(")[1].split(" ")[0]  # the kubectl kflare dev runs
        return subprocess.run(
            [binary, "--kubeconfig", self.kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture(scope="module")
def dev(control_plane: ControlPlane) -> Iterator[Dev]:
    kflare = Path(sys.executable).with_name("kflare")
    proc = subprocess.Popen(
        [str(kflare), "dev", "--bin-dir", str(control_plane.bin_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout is not None
    lines: list[str] = []
    # Read in a thread for as long as it runs, so the table it keeps printing never fills the pipe.
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not any(line.startswith("dnsrecord.kflare.dev/www created") for line in lines):  # examples applied
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "kflare dev did not apply the examples:\n" + "".join(lines)
            time.sleep(0.1)
        kubeconfig = next(line for line in lines if "--kubeconfig" in line).split("--kubeconfig ")[1].split(" ")[0]
        command = next(line for line in lines if line.startswith("  curl ")).strip()
        yield Dev(proc, lines, reader, kubeconfig, command)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        reader.join(10)


BAD = {
    "proxied TXT": (
        {"name": "txt.example.com", "type": "TXT", "content": "hello", "proxied": True},
        "spec.proxied: only A, AAAA and CNAME records can be proxied, not TXT",
    ),
    "A of 192.0.2.300": (
        {"name": "bad.example.com", "type": "A", "content": "192.0.2.300"},
        "spec.content: an A record's content must be an IPv4 address",
    ),
    "SRV without data": (
        {"name": "_sip._tcp.example.com", "type": "SRV"},
        "spec.content: a SRV record needs content or data",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_kflare_dev_refuses_bad_manifests_at_apply(dev: Dev, case: str) -> None:
    spec, reason = BAD[case]
    name = "bad-" + case.split()[0].lower()
    manifest = {
        "apiVersion": "kflare.dev/v1alpha1",
        "kind": "DNSRecord",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"zoneRef": {"name": "example-com"}, **spec},
    }
    done = dev.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    assert done.returncode != 0, done.stdout
    assert done.stderr.strip() == (
        'The request is invalid: error when creating "STDIN": admission webhook "dnsrecords.validate.kflare.dev"'
        f" denied the request: {reason}"
    )
    assert dev.kubectl("get", "dnsrecord", "-n", "demo", name).returncode != 0  # nothing stored


def test_kflare_dev_prints_a_command_that_scrapes_the_metrics(dev: Dev) -> None:
    done = subprocess.run(["bash", "-c", dev.metrics_command], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "controller_runtime_reconcile_total{" in done.stdout
    assert 'kflare_http_requests_total{handler="/validate/{plural}",listener="webhook"' in done.stdout
    url = dev.metrics_command.rsplit(" ", 1)[1]
    cacert = dev.metrics_command.split("--cacert ")[1].split(" ")[0]
    anonymous = subprocess.run(
        ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", cacert, url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert anonymous.stdout == "401"  # the token is what lets it in


def test_kflare_dev_serves_the_gateway_class_on_envoy(dev: Dev) -> None:
    import http.server

    import httpx

    from app.controlplane import free_port

    port = free_port()

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"hello from {self.path}".encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _, line = dev.line("Gateway class cloudflare-tunnel")
        envoy_url = line.split("Envoy at ")[1].split(";")[0]
        manifests = [
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": "edge", "namespace": "demo"},
                "spec": {
                    "gatewayClassName": "cloudflare-tunnel",
                    "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "page", "namespace": "demo"},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]},
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": "page", "namespace": "demo", "labels": {"kubernetes.io/service-name": "page"}},
                "addressType": "FQDN",
                "ports": [{"name": "http", "port": port}],
                "endpoints": [{"addresses": ["127.0.0.1"]}],
            },
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": {"name": "app", "namespace": "demo"},
                "spec": {
                    "parentRefs": [{"name": "edge"}],
                    "hostnames": ["app.example.com"],
                    "rules": [{"backendRefs": [{"name": "page", "port": 80}]}],
                },
            },
        ]
        done = dev.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(m) for m in manifests))
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 30
        answer = ""
        while time.monotonic() < deadline:
            reply = httpx.get(f"{envoy_url}/page", headers={"Host": "app.example.com"}, timeout=2)
            if reply.status_code == 200:
                answer = reply.text
                break
            time.sleep(0.2)  # polling Envoy until the route arrives, with the deadline above
        assert answer == "hello from /page"
    finally:
        server.shutdown()


def test_kflare_dev_answers_the_command_it_prints_for_its_example(dev: Dev) -> None:
    index, _ = dev.line("Gateway class cloudflare-tunnel")
    command = dev.lines[index + 1].strip()
    assert command.startswith("curl "), command
    assert "'Host: hello.example.com'" in command
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run(
            [*shlex.split(command), "--max-time", "2", "-w", "\n%{http_code}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        body, _, code = done.stdout.rpartition("\n")
        if code == "200" or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # polling until Envoy has the route, with the deadline above
    assert code == "200", done.stdout + done.stderr
    assert body.strip() == "Hello from kflare dev: hello.example.com/ reached Service demo/hello through Envoy"


def test_kflare_dev_stops_everything_on_sigterm(dev: Dev) -> None:
    """Last in the module: it stops the `kflare dev` the tests above used (the fixture's teardown then has nothing
    left to stop), which has served the examples, refused manifests and published a route by now."""
    workdir = dev.kubeconfig.split("/plane/")[0]
    assert running_under(workdir), "the API server and etcd run from the working directory"
    printed = len(dev.lines)
    dev.proc.send_signal(signal.SIGTERM)
    assert dev.proc.wait(60) == 0, "".join(dev.lines[-50:])
    dev.reader.join(10)
    rest = "".join(dev.lines[printed:])
    assert "stopped" in rest
    # A clean stop logs no error: nothing reconciles once the listeners (the webhook among them) have closed.
    assert not [line for line in rest.splitlines() if " ERROR " in line], rest
    assert running_under(workdir) == []
    assert not Path(workdir).exists()
