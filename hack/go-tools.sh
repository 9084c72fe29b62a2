#!/usr/bin/env bash
# Builds (or reuses) Go tools the tests run, from the Go module proxy, and prints the path of each one asked for:
#   hack/go-tools.sh promtool prometheus actionlint syft
# promtool (Prometheus' rule checker and unit tester), prometheus (the server the e2e tests scrape kflare with),
# actionlint (the GitHub Actions workflow linter) and syft (the SBOM generator BuildKit's scanner runs) land in a
# per-version cache directory outside the repository, as hack/test-bins.sh does for the control plane.
# prometheus-operator-crds prints the directory of the Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule...)
# in its Go module, which the Go module cache keeps.
set -euo pipefail
# shellcheck source=hack/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-0.316.0}   # the Go module of Prometheus 3.16.0
ACTIONLINT_VERSION=${ACTIONLINT_VERSION:-1.7.12}
SYFT_VERSION=${SYFT_VERSION:-1.57.1}
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-0.94.0}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
mkdir -p "$cache_root"
log() { echo "go-tools: $*" >&2; }

command -v go >/dev/null || { log "go is required"; exit 1; }
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

# build NAME MODULE VERSION PACKAGE [LDFLAGS [TAGS]]
build() {
  local name=$1 module=$2 version=$3 package=$4 ldflags=${5:-} tags=${6:-}
  local out=$cache_root/$name-v$version
  mkdir -p "$out"
  (
    exec 9>"$out/.lock"
    flock 9
    if [ ! -x "$out/$name" ]; then
      log "building $name v$version"
      local work start
      work=$(mktemp -d)
      trap 'rm -rf "$work"' EXIT
      start=$(date +%s)
      cd "$work"
      printf 'module local.invalid/%s\n\ngo 1.24.0\n' "$name" > go.mod
      go get "$module@v$version" >&2
      go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out/$name.new" "$package" >&2
      mv "$out/$name.new" "$out/$name"
      log "built $name in $(( $(date +%s) - start ))s"
    fi
  )
  echo "$out/$name"
}

for tool in "$@"; do
  case $tool in
    promtool)
      v=${PROMETHEUS_VERSION#0.}   # 316.0 -> 3.16.0
      build promtool github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
        github.com/prometheus/prometheus/cmd/promtool \
        "-X github.com/prometheus/common/version.Version=${v:0:1}.${v:1}" remove_all_sd
      ;;
    prometheus)
      # The same release as promtool, so the rules the unit tests pass are the rules the server evaluates. Of the
      # service discoveries only Kubernetes' (what a ServiceMonitor becomes) and the always-built file and HTTP
      # ones; without builtinassets the UI is not embedded, which the tests, talking to the HTTP API, do not miss.
      v=${PROMETHEUS_VERSION#0.}
      build prometheus github.com/prometheus/prometheus "$PROMETHEUS_VERSION" \
        github.com/prometheus/prometheus/cmd/prometheus \
        "-X github.com/prometheus/common/version.Version=${v:0:1}.${v:1}" remove_all_sd,enable_kubernetes_sd
      ;;
    actionlint)
      # actionlint checks the workflows' `run:` scripts with shellcheck, Debian's package, when it is installed.
      command -v shellcheck >/dev/null || apt_install shellcheck
      build actionlint github.com/rhysd/actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint \
        "-X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
      ;;
    syft)
      build syft github.com/anchore/syft "$SYFT_VERSION" github.com/anchore/syft/cmd/syft \
        "-X main.version=$SYFT_VERSION"
      ;;
    prometheus-operator-crds)
      module=github.com/prometheus-operator/prometheus-operator@v$PROMETHEUS_OPERATOR_VERSION
      dir=$(go mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
      [ -d "$dir/example/prometheus-operator-crd" ] || { log "no CRDs in $module ($dir)"; exit 1; }
      echo "$dir/example/prometheus-operator-crd"
      ;;
    *) log "unknown tool: $tool"; exit 1 ;;
  esac
done
