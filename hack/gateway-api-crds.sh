#!/usr/bin/env bash
# Fetches (or reuses) the Gateway API CRDs the Gateway class is built against and prints their directory as the last
# line: the sigs.k8s.io/gateway-api Go module at a pinned version, through `go mod download`, copied into a
# per-version cache directory outside the repository (config/crd/standard and config/crd/experimental).
set -euo pipefail

GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.6.3}
PYTHON=${PYTHON:-python3}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
out=$cache_root/gateway-api-$GATEWAY_API_VERSION
mkdir -p "$out"

exec 9>"$out/.lock"
flock 9

if [ ! -d "$out/standard" ]; then
  command -v go >/dev/null || { echo "gateway-api-crds: go is required to fetch the Gateway API module" >&2; exit 1; }
  export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
  dir=$(go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" \
    | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$out/standard.new" "$out/experimental.new"
  cp -r "$dir/config/crd/standard" "$out/standard.new"
  cp -r "$dir/config/crd/experimental" "$out/experimental.new"
  chmod -R u+w "$out/standard.new" "$out/experimental.new"
  mv "$out/experimental.new" "$out/experimental"
  mv "$out/standard.new" "$out/standard"
  echo "gateway-api-crds: fetched $GATEWAY_API_VERSION" >&2
fi
echo "$out"
