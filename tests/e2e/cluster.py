"""A one-node Kubernetes cluster on this machine: the test control plane (etcd + kube-apiserver, app.controlplane)
plus kube-controller-manager, kube-scheduler, containerd, a kubelet and kube-proxy, on a bridge of its own.

The binaries come from `hack/test-bins.sh` (the control plane) and `hack/test-bins.sh node` (the node: built the same
way, with containerd and the CNI plugins from Debian). Images are imported into containerd from podman; nothing is
pulled. Pod and Service addresses are private ranges that exist only on the bridge this module creates: the API
server listens on the bridge's host address (so pods reach it as the `kubernetes` Service), the Service range is
routed onto the bridge (so the host's kube-proxy rules, not the default route, take Service traffic), and a FORWARD
rule keeps pods from reaching anything past the bridge.

Everything is undone by `stop()`: processes stopped by their handles (the containerd shims by the PIDs containerd's
own socket names), the kubelet's and containerd's mounts and the sandboxes' network namespaces unmounted, kube-proxy's
rules flushed, the bridge, route and FORWARD rule removed; a rerun starts from a clean machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from app.controlplane import ControlPlane, ControlPlaneError, Process, free_port, kubeconfig
from tests.fixtures.kube import leaked as plane_leaked
from tests.fixtures.kube import user_kubeconfig

NODE = "kflare-e2e"
BRIDGE = "kflare-e2e0"
POD_CIDR = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/24"
GUARD = "KFLARE-E2E-GUARD"
NETNS = Path("/run/netns")
LOCK = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kflare" / ".e2e.lock"


def run(*argv: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise ControlPlaneError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def node_bin_dir_from_env() -> Path | None:
    """The node's binaries (kubelet and the rest) named by K8S_NODE_BIN, what `make e2e` passes."""
    value = os.environ.get("K8S_NODE_BIN")
    if value and (Path(value) / "kubelet").exists():
        return Path(value)
    return None


def gateway_bin_dir_from_env() -> Path | None:
    """What the Gateway tests run on the node (`hack/gateway-e2e.sh`), named by K8S_GATEWAY_BIN as `make e2e` does."""
    value = os.environ.get("K8S_GATEWAY_BIN")
    if value and (Path(value) / "coredns").exists():
        return Path(value)
    return None


def _mounts_under(roots: list[Path]) -> list[str]:
    """Mount points at or below `roots`, deepest first (the order they can be unmounted in)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(r) or point.startswith(f"{r}/") for r in roots):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def _network_up() -> None:
    _network_down()  # what a run killed before its teardown left behind
    run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "add", f"{GATEWAY}/{POD_CIDR.split('/')[1]}", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    # A pod's packets to a Service (the data plane's to the controller's xDS, say) are DNATed on the host and go back
    # out on the bridge: forwarding on for what enters by the bridge only, whatever the machine's own setting.
    Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/forwarding").write_text("1\n")
    run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", GATEWAY)
    # Pods talk to each other and to the host's addresses on the bridge, never past it.
    run("iptables", "-N", GUARD)
    run("iptables", "-A", GUARD, "-i", BRIDGE, "-o", BRIDGE, "-j", "RETURN")
    run("iptables", "-A", GUARD, "-i", BRIDGE, "-j", "DROP")
    run("iptables", "-A", GUARD, "-o", BRIDGE, "-j", "DROP")
    run("iptables", "-I", "FORWARD", "1", "-j", GUARD)


def _drop_chain(tool: str, table: str, chain: str, parents: tuple[str, ...] = ()) -> None:
    for parent in parents:
        while run(tool, "-t", table, "-D", parent, "-j", chain, check=False).returncode == 0:
            pass
    run(tool, "-t", table, "-F", chain, check=False)
    run(tool, "-t", table, "-X", chain, check=False)


def _network_down() -> None:
    _drop_chain("iptables", "filter", GUARD, ("FORWARD",))
    # The kubelet's own chains (kube-proxy --cleanup leaves them): its firewall and the canaries it watches.
    for tool in ("iptables", "ip6tables"):
        _drop_chain(tool, "filter", "KUBE-FIREWALL", ("INPUT", "OUTPUT"))
        for table in ("mangle", "nat", "filter"):
            _drop_chain(tool, table, "KUBE-KUBELET-CANARY")
        _drop_chain(tool, "mangle", "KUBE-IPTABLES-HINT")
    run("ip", "route", "del", SERVICE_CIDR, "dev", BRIDGE, check=False)
    run("ip", "link", "del", BRIDGE, check=False)


@dataclass
class Cluster(ControlPlane):
    """A ControlPlane with a node: `start()` returns once the node is Ready and pods can be admitted."""

    node_bin_dir: Path = field(default_factory=Path)
    images: list[Path] = field(default_factory=list)
    """Image archives (`podman save`) imported into containerd before the kubelet starts."""
    coredns: Path | None = None
    """A CoreDNS binary: run on the node at the bridge's address as the pods' DNS (the cluster's names only); without
    it pods have no DNS at all."""
    timings: dict[str, float] = field(default_factory=dict)
    _node_processes: list[Process] = field(default_factory=list)
    _netns_before: set[str] = field(default_factory=set)
    _lock: IO[bytes] | None = None
    _network: bool = False

    def __post_init__(self) -> None:
        self.address = GATEWAY

    # -- the API server, as a cluster with nodes needs it ---------------------------------------------------------

    def serving_hosts(self) -> list[str]:
        # What pods dial: the `kubernetes` Service's address and names.
        service_ip = SERVICE_CIDR.rsplit(".", 1)[0] + ".1"
        names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"]
        return [*super().serving_hosts(), service_ip, *names]

    def apiserver_flags(self, etcd_url: str, port: int) -> dict[str, str]:
        flags = super().apiserver_flags(etcd_url, port)
        kubelet_key, kubelet_cert = self.ca.issue("kube-apiserver-kubelet-client", groups=["system:masters"])
        (self.workdir / "kubelet-client.key").write_bytes(kubelet_key)
        (self.workdir / "kubelet-client.crt").write_bytes(kubelet_cert)
        del flags["disable-admission-plugins"]  # the controller-manager makes the `default` ServiceAccounts
        flags |= {
            # The `kubernetes` Service's endpoint is the bridge address, where pods reach the API server.
            "endpoint-reconciler-type": "lease",
            "service-cluster-ip-range": SERVICE_CIDR,
            "authorization-mode": "Node,RBAC",
            "kubelet-client-certificate": str(self.workdir / "kubelet-client.crt"),
            "kubelet-client-key": str(self.workdir / "kubelet-client.key"),
            "kubelet-preferred-address-types": "InternalIP",
        }
        return flags

    # -- start and stop ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        for name in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"):
            if not (self.node_bin_dir / name).exists():
                raise ControlPlaneError(f"{self.node_bin_dir / name} is missing: run `hack/test-bins.sh node`")
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        self._lock = LOCK.open("wb")
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # one cluster per machine: the bridge and iptables are the host's
        began = time.monotonic()
        try:
            self._netns_before = set(os.listdir(NETNS)) if NETNS.exists() else set()
            _network_up()
            self._network = True
            super().start()
            self.timings["control plane"] = time.monotonic() - began
            self._start_controllers()
            self._start_containerd()
            self._start_dns()
            self._start_kubelet()
            self._start_kube_proxy()
            self._wait_node_ready()
        except BaseException:
            self.stop()
            raise
        self.timings["cluster"] = time.monotonic() - began

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = Process(argv, self.workdir / f"{name}.log")
        self._node_processes.append(proc)
        return proc

    def component_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        return user_kubeconfig(self, user, groups)

    def _start_controllers(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                str(self.node_bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.component_kubeconfig('system:kube-controller-manager')}",
                # Each controller with its own ServiceAccount, bound by the bootstrap RBAC as in a real cluster.
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                # Published as the kube-root-ca.crt ConfigMap every projected token volume mounts.
                f"--root-ca-file={self.ca_path}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(self.node_bin_dir / "kube-scheduler"),
                f"--kubeconfig={self.component_kubeconfig('system:kube-scheduler')}",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=1",
            ],
        )

    @property
    def containerd_socket(self) -> Path:
        return self.workdir / "containerd" / "containerd.sock"

    def ctr(self, *args: str, timeout: float = 300.0) -> str:
        return run("ctr", f"--address={self.containerd_socket}", "--namespace=k8s.io", *args, timeout=timeout).stdout

    def _start_containerd(self) -> None:
        base = self.workdir / "containerd"
        cni = base / "cni"
        cni.mkdir(parents=True)
        pause = (self.node_bin_dir / "pause.ref").read_text().strip()
        conflist = {
            "cniVersion": "0.4.0",
            "name": "kflare-e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    # Nothing leaves the bridge, so nothing is masqueraded.
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(base / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (cni / "10-kflare-e2e.conflist").write_text(json.dumps(conflist, indent=2))
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{base / "root"}"
state = "{base / "state"}"
[grpc]
  address = "{self.containerd_socket}"
[ttrpc]
  address = "{base / "containerd.sock.ttrpc"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"
[{cri}]
  sandbox_image = "{pause}"
  # This process may not lower an oom_score_adj (no CAP_SYS_RESOURCE): the kubelet's -998 for sandboxes would make
  # runc's init die. Clamped to containerd's own score instead.
  restrict_oom_score_adj = true
  enable_selinux = false
[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{cni}"
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  SystemdCgroup = false
"""
        (base / "config.toml").write_text(config)
        proc = self._spawn("containerd", ["containerd", f"--config={base / 'config.toml'}"])
        deadline = time.monotonic() + 30
        while run("ctr", f"--address={self.containerd_socket}", "version", check=False, timeout=10).returncode:
            if not proc.running or time.monotonic() > deadline:
                raise ControlPlaneError(f"containerd did not start:\n{proc.tail()}")
            time.sleep(0.2)
        self.import_images(self.node_bin_dir / "pause.tar", *self.images)

    def import_images(self, *archives: Path) -> None:
        """Image archives (`podman save`) into containerd, under the names they were saved with."""
        for archive in archives:
            began = time.monotonic()
            self.ctr("images", "import", str(archive))
            self.timings[f"import {archive.name}"] = time.monotonic() - began

    def _start_dns(self) -> None:
        if self.coredns is None:
            return
        # The cluster's zone only: any other name is refused, so nothing a pod asks goes past the node.
        corefile = self.workdir / "Corefile"
        corefile.write_text(
            f"""cluster.local:53 {{
    bind {GATEWAY}
    errors
    kubernetes cluster.local {{
        kubeconfig {self.component_kubeconfig("system:coredns", ("system:masters",))}
    }}
}}
"""
        )
        proc = self._spawn("coredns", [str(self.coredns), "-conf", str(corefile)])
        deadline = time.monotonic() + 30
        while "kubernetes.default.svc.cluster.local" not in self._dig("kubernetes.default.svc.cluster.local"):
            if not proc.running or time.monotonic() > deadline:
                raise ControlPlaneError(f"coredns did not answer:\n{proc.tail()}")
            time.sleep(0.2)

    def _dig(self, name: str) -> str:
        """An A query to the node's DNS, with the resolver of this process's own libc out of the way."""
        query = struct.pack(">HHHHHH", 0x4B46, 0x0100, 1, 0, 0, 0)
        query += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(1)
            try:
                sock.sendto(query, (GATEWAY, 53))
                answer = sock.recv(512)
            except OSError:
                return ""
        answers = struct.unpack(">H", answer[6:8])[0]
        return name if answer[:2] == query[:2] and answers else ""

    def _start_kubelet(self) -> None:
        base = self.workdir / "kubelet"
        base.mkdir()
        # Pods resolve names against the bridge (where nothing answers), never against the host's resolver.
        (base / "resolv.conf").write_text(f"nameserver {GATEWAY}\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs",
            # Each cgroup v1 controller is mounted under /sys/fs/cgroup here; 1.31+ refuses that unless told.
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "address": GATEWAY,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "resolvConf": str(base / "resolv.conf"),
            **({"clusterDNS": [GATEWAY], "clusterDomain": "cluster.local"} if self.coredns else {}),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.ca_path)},
            },
            "authorization": {"mode": "Webhook"},
            # The disk is the machine's, shared and mostly full of other things: evict on nothing short of an
            # emergency, and never collect the imported images (nothing could pull them back).
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
        }
        (base / "config.json").write_text(json.dumps(config, indent=2))
        key, cert = self.ca.issue(f"system:node:{NODE}", groups=["system:nodes"])
        kubelet_config = self.workdir / "kubeconfig-kubelet"
        kubelet_config.write_text(json.dumps(kubeconfig(self.host, self.ca.pem, cert=cert, key=key)))
        self._spawn(
            "kubelet",
            [
                str(self.node_bin_dir / "kubelet"),
                f"--config={base / 'config.json'}",
                f"--kubeconfig={kubelet_config}",
                f"--root-dir={base / 'root'}",
                f"--cert-dir={base / 'pki'}",
                f"--hostname-override={NODE}",
                f"--node-ip={GATEWAY}",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.component_kubeconfig("system:kube-proxy"))},
            "mode": "iptables",
            "hostnameOverride": NODE,
            "clusterCIDR": POD_CIDR,
            "healthzBindAddress": f"127.0.0.1:{free_port()}",
            "metricsBindAddress": f"127.0.0.1:{free_port()}",
            "nodePortAddresses": [f"{GATEWAY}/32"],
            # The machine's conntrack settings are left as they are (a container may not change them).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False},
        }
        path = self.workdir / "kube-proxy.json"
        path.write_text(json.dumps(config, indent=2))
        self._spawn("kube-proxy", [str(self.node_bin_dir / "kube-proxy"), f"--config={path}", "--v=1"])

    def kubectl(
        self, *args: str, timeout: float = 60.0, check: bool = True, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.binary("kubectl")), f"--kubeconfig={self.kubeconfig_path}", *args],
            input=input_text,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def _wait_node_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for proc in self._node_processes:
                if not proc.running:
                    raise ControlPlaneError(f"{proc.log_path.name} exited:\n{proc.tail()}")
            node = self.kubectl("get", "node", NODE, "-o", "json", check=False)
            account = self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False)
            if node.returncode == 0 and account.returncode == 0:
                conditions = {c["type"]: c for c in json.loads(node.stdout)["status"].get("conditions", [])}
                ready = conditions.get("Ready", {})
                if ready.get("status") == "True":
                    return
                last = f"{ready.get('reason')}: {ready.get('message')}"
            else:
                last = node.stderr + account.stderr
            time.sleep(0.5)
        tails = "\n".join(f"--- {p.log_path.name}\n{p.tail(15)}" for p in self._node_processes)
        raise ControlPlaneError(f"node {NODE} not Ready after {timeout:.0f}s ({last}):\n{tails}")

    def logs(self) -> Iterator[tuple[str, str]]:
        for proc in [*self.processes, *self._node_processes]:
            yield proc.log_path.name, proc.tail(40)

    def stop(self) -> None:
        began = time.monotonic()
        by_name = {p.log_path.stem: p for p in self._node_processes}

        def timed(name: str, action: Callable[[], object]) -> None:
            mark = time.monotonic()
            action()
            self.timings[f"stop {name}"] = time.monotonic() - mark

        # The kubelet first, so it restarts nothing; then every container, while containerd can still say which.
        for name in ("kubelet", "kube-scheduler", "kube-controller-manager"):
            if name in by_name:
                timed(name, lambda proc=by_name[name]: proc.stop(grace=10))
        if "containerd" in by_name:
            timed("containers", lambda: self._stop_containers(by_name["containerd"]))
            timed("containerd", lambda: by_name["containerd"].stop(grace=10))
        if "kube-proxy" in by_name:
            timed("kube-proxy", lambda: by_name["kube-proxy"].stop(grace=10))
            cleanup = [str(self.node_bin_dir / "kube-proxy"), "--cleanup", "--proxy-mode=iptables"]
            timed("kube-proxy rules", lambda: run(*cleanup, check=False))
        for proc in self._node_processes:
            proc.stop(grace=10)
        timed("mounts", self._unmount)
        if self._network:
            timed("network", _network_down)
            self._network = False
        timed("control plane", super().stop)
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        self.timings["teardown"] = time.monotonic() - began

    def _stop_containers(self, containerd: Process) -> None:
        """Kill every task and its shim: the shims outlive containerd (they are meant to), and hold mounts."""
        if not containerd.running:
            return
        shims: list[int] = []
        tasks = run(
            "ctr", f"--address={self.containerd_socket}", "--namespace=k8s.io", "tasks", "ls", "-q", check=False
        )
        for task in tasks.stdout.split():
            run(
                "ctr",
                f"--address={self.containerd_socket}",
                "-n",
                "k8s.io",
                "tasks",
                "kill",
                "-s",
                "KILL",
                task,
                check=False,
            )
        # The shims of this containerd name its socket on their command line; no other process does.
        socket = str(self.containerd_socket)
        for entry in (e for e in os.listdir("/proc") if e.isdigit()):
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and socket.encode() in argv:
                shims.append(int(entry))
        for pid in shims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _unmount(self) -> None:
        created = (set(os.listdir(NETNS)) if NETNS.exists() else set()) - self._netns_before
        roots = [self.workdir, *(NETNS / n for n in created if n.startswith("cni-"))]
        for point in _mounts_under(roots):
            run("umount", "--lazy", point, check=False)
        for name in created:
            if name.startswith("cni-"):
                (NETNS / name).unlink(missing_ok=True)

    @property
    def leaked(self) -> list[str]:
        left = plane_leaked(self)
        left += [f"pid {p.popen.pid} ({p.log_path.name})" for p in self._node_processes if p.running]
        if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
            left.append(f"bridge {BRIDGE}")
        return left
