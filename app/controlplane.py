"""A local Kubernetes control plane: etcd and kube-apiserver on loopback, for `kflare dev` and the tests.

The binaries come from `hack/test-bins.sh`. Everything the API server needs is generated here: one test CA signs the
serving certificate, the admin client certificate (group `system:masters`) and any extra user; a separate key signs
ServiceAccount tokens, so TokenRequest, TokenReview and SubjectAccessReview work as in a real cluster. There is no
controller-manager, scheduler or kubelet: namespaces never finish terminating and no Pod runs.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Self

from cryptography.hazmat.primitives import serialization

from app.pki import CertificateAuthority, _new_key, key_pem


def bin_dir_from_env() -> Path | None:
    """The directory of kube-apiserver and etcd named by K8S_TEST_BIN (what `make` passes) or KUBEBUILDER_ASSETS."""
    for var in ("K8S_TEST_BIN", "KUBEBUILDER_ASSETS"):
        value = os.environ.get(var)
        if value and (Path(value) / "kube-apiserver").exists():
            return Path(value)
    return None


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message carries the tail of the failing process's log."""


_LOWEST_PORT = 10_000
_handed_out: set[int] = set()
_pick = random.SystemRandom()  # its own: a test that seeds `random` must not make parallel workers pick alike


def _ephemeral_ports() -> range:
    """The ports the kernel gives outgoing connections (Linux's default where it does not say)."""
    try:
        low, high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A port nothing listens on, for a process started next to bind. Chosen outside the ephemeral range: a port the
    kernel hands out for outgoing connections (every client of the API server, the emulator, Envoy) can be taken
    by one between this check and the bind, which failed a test run once; no port is handed out twice."""
    ephemeral = _ephemeral_ports()
    below = range(_LOWEST_PORT, ephemeral.start) if ephemeral.start > _LOWEST_PORT + 1000 else range(0)
    for _ in range(200):
        port = _pick.choice(below) if below else 0
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("", port))  # every address: the webhook and probes bind 0.0.0.0
            except OSError:
                continue
            port = sock.getsockname()[1]
        _handed_out.add(port)
        return int(port)
    raise RuntimeError("no free port below the ephemeral range")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    server: str, ca: bytes, *, cert: bytes | None = None, key: bytes | None = None, token: str | None = None
) -> dict[str, object]:
    user: dict[str, str] = {}
    if cert is not None and key is not None:
        user = {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)}
    if token is not None:
        user = {"token": token}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kflare",
        "clusters": [{"name": "kflare", "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": "kflare", "user": user}],
        "contexts": [{"name": "kflare", "context": {"cluster": "kflare", "user": "kflare"}}],
    }


class Process:
    """A child process whose output goes to a log file; stopped by its handle, never by name."""

    def __init__(self, argv: Sequence[str], log: Path, *, append: bool = False) -> None:
        self.log_path = log
        self._log: IO[bytes] = log.open("ab" if append else "wb")
        self.popen = subprocess.Popen(list(argv), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 20.0) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()


def _wait_ok(url: str, deadline_s: float, proc: Process, context: ssl.SSLContext | None = None) -> None:
    deadline = time.monotonic() + deadline_s
    last: object = None
    while time.monotonic() < deadline:
        if not proc.running:
            raise ControlPlaneError(f"{proc.log_path.name} exited with {proc.popen.returncode}:\n{proc.tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as reply:  # noqa: S310 (loopback URL)
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = exc
        time.sleep(0.2)
    raise ControlPlaneError(f"{url} not ready after {deadline_s:.0f}s ({last!r}):\n{proc.tail()}")


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver pair. Use `start()`, then `stop()` (or the context manager)."""

    bin_dir: Path
    workdir: Path
    extra_args: Sequence[str] = ()
    ready_timeout: float = 120.0
    address: str = "127.0.0.1"
    """Where the API server listens and what it advertises: loopback, unless pods must reach it."""
    host: str = ""
    ca: CertificateAuthority = field(default_factory=lambda: CertificateAuthority.create("kflare-local-ca"))
    processes: list[Process] = field(default_factory=list)
    etcd_url: str = ""
    _owns_workdir: bool = False
    _apiserver_argv: list[str] = field(default_factory=list)

    @classmethod
    def in_tempdir(cls, bin_dir: Path, **kwargs: Any) -> Self:
        plane = cls(bin_dir=bin_dir, workdir=Path(tempfile.mkdtemp(prefix="kflare-plane-")), **kwargs)
        plane._owns_workdir = True
        return plane

    @property
    def kubeconfig_path(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def ca_path(self) -> Path:
        return self.workdir / "ca.crt"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name in ("kube-apiserver", "etcd"):
            if not self.binary(name).exists():
                raise ControlPlaneError(f"{self.binary(name)} is missing: run `make test-bins`")
        try:
            etcd_url = self._start_etcd()
            self._start_apiserver(etcd_url)
        except BaseException:
            self.stop()
            raise

    def _start_etcd(self) -> str:
        url = f"http://127.0.0.1:{free_port()}"
        argv = [
            str(self.binary("etcd")),
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{free_port()}",
            "--log-level=warn",
            # Throwaway data: durability costs seconds per test run and buys nothing here.
            "--unsafe-no-fsync=true",
        ]
        proc = Process(argv, self.workdir / "etcd.log")
        self.processes.append(proc)
        _wait_ok(url + "/health", 30, proc)
        self.etcd_url = url
        return url

    def _start_apiserver(self, etcd_url: str) -> None:
        work = self.workdir
        self.ca_path.write_bytes(self.ca.pem)
        server_key, server_cert = self.ca.issue("kube-apiserver", hosts=self.serving_hosts(), server=True)
        (work / "apiserver.key").write_bytes(server_key)
        (work / "apiserver.crt").write_bytes(server_cert)
        signer = _new_key()
        (work / "sa.key").write_bytes(key_pem(signer))
        # The verifying side parses public keys (or SEC1 private keys), not PKCS#8: hand it the public half.
        (work / "sa.pub").write_bytes(
            signer.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        port = free_port()
        self.host = f"https://{self.address}:{port}"
        flags = self.apiserver_flags(etcd_url, port)
        self._apiserver_argv = [
            str(self.binary("kube-apiserver")),
            *(f"--{name}={value}" for name, value in flags.items()),
            *self.extra_args,
        ]
        self._run_apiserver()
        admin_key, admin_cert = self.ca.issue("kflare-admin", groups=["system:masters"])
        self.kubeconfig_path.write_text(
            json.dumps(kubeconfig(self.host, self.ca.pem, cert=admin_cert, key=admin_key), indent=2)
        )

    def serving_hosts(self) -> list[str]:
        """The names and addresses of the API server's serving certificate."""
        return list(dict.fromkeys(["localhost", "127.0.0.1", self.address]))

    def apiserver_flags(self, etcd_url: str, port: int) -> dict[str, str]:
        """kube-apiserver's flags by name; a subclass changes or drops some (a cluster with nodes needs other
        ones), and `extra_args` come after them."""
        work = self.workdir
        return {
            "etcd-servers": etcd_url,
            "bind-address": self.address,
            "secure-port": str(port),
            # Loopback advertise address is refused by the lease endpoint reconciler; nothing here needs it.
            "advertise-address": self.address,
            "endpoint-reconciler-type": "none",
            "cert-dir": str(work),
            "tls-cert-file": str(work / "apiserver.crt"),
            "tls-private-key-file": str(work / "apiserver.key"),
            "client-ca-file": str(self.ca_path),
            "authorization-mode": "RBAC",
            "service-account-issuer": self.host,
            "service-account-key-file": str(work / "sa.pub"),
            "service-account-signing-key-file": str(work / "sa.key"),
            "service-cluster-ip-range": "10.0.0.0/24",
            # No controller-manager creates `default` ServiceAccounts, so this plugin would refuse every Pod.
            "disable-admission-plugins": "ServiceAccount",
            "allow-privileged": "true",
            "v": "1",
        }

    def _run_apiserver(self) -> None:
        proc = Process(self._apiserver_argv, self.workdir / "kube-apiserver.log", append=True)
        self.processes.append(proc)
        context = ssl.create_default_context(cafile=str(self.ca_path))
        _wait_ok(self.host + "/readyz", self.ready_timeout, proc, context)

    def wait_established(self, names: Iterable[str] | None = None, timeout: float = 60.0) -> None:
        """Until every CRD of `names` (every CRD, when None) is Established. Each poll is one listing of the CRDs:
        `kubectl wait` watches them one after the other, a tenth of a second or more each at its client-side rate
        limit, and fails at once on a CRD created too recently to have conditions."""
        wanted = None if names is None else set(names)
        kubectl = [str(self.binary("kubectl")), "--kubeconfig", str(self.kubeconfig_path)]
        template = '{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Established")].status}{"\\n"}{end}'
        deadline = time.monotonic() + timeout
        while True:
            listed = subprocess.run(
                [*kubectl, "get", "crd", "-o", f"jsonpath={template}"],
                capture_output=True,
                text=True,
                timeout=max(10.0, timeout),
                check=False,
            )
            status = dict(line.split("=", 1) for line in listed.stdout.splitlines() if "=" in line)
            pending = sorted(
                (set(status) if wanted is None else wanted) - {n for n, s in status.items() if s == "True"}
            )
            if listed.returncode == 0 and not pending:
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"CRDs not Established after {timeout:g} s: {', '.join(pending)} {listed.stderr.strip()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        # The API server first: it would otherwise spend its grace period retrying a vanished etcd.
        for proc in reversed(self.processes):
            proc.stop()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
