#!/usr/bin/env bash
# Builds the kflare image from the Dockerfile with podman and prints its reference as the last line.
#
#   hack/image.sh            build (or reuse) the image
#   hack/image.sh tools      only install what is missing: podman, runc, mmdebstrap, and docker-registry (the
#                            Distribution registry, which the tests run on loopback to push images and charts to)
#   hack/image.sh podman ... run podman with the settings this script uses (runtime, cgroups, limits)
#   hack/image.sh base       make (or reuse) only the base, and print its reference (other images build on it)
#
# With no image registry at hand, the Dockerfile's base (python:3.X-slim) is stood in for by a local one made with
# mmdebstrap from Debian's packages: the Debian release whose python3 has the same minor version, with `python` and
# `pip` where the official image has them. It trusts the CA certificates this machine trusts, for TLS-inspecting
# proxies. podman, runc and mmdebstrap are installed with apt-get when missing (as root).
#
# Both images are tagged by content: the base by its recipe, the kflare image by the Dockerfile, the build context
# (what .dockerignore lets in) and the base's ID, so a rerun with nothing changed builds nothing.
# KFLARE_BASE_IMAGE=<ref> builds on an image podman already has instead of making one.
set -euo pipefail
# shellcheck source=hack/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/hack
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
mkdir -p "$cache_root"
log() { echo "image: $*" >&2; }

need=()
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || need+=(runc)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v docker-registry >/dev/null || need+=(docker-registry)
apt_install "${need[@]}"

if [ "${1:-}" = tools ]; then
  exit 0
fi
if [ "${1:-}" = podman ]; then
  shift
  exec podman "$@"
fi

# One build at a time: a second caller waits, then finds the image built.
exec 9>"$cache_root/.image.lock"
flock 9

# -- the base ------------------------------------------------------------------------------------------------------

dockerfile_base=$(sed -n 's/^ARG BASE=//p' "$root/Dockerfile" | head -n 1)
minor=$(sed -n 's/^python:3\.\([0-9]*\)-slim$/\1/p' <<<"$dockerfile_base")
[ -n "$minor" ] || { log "the Dockerfile's base is not python:3.X-slim: $dockerfile_base"; exit 1; }
case $minor in
  11) suite=bookworm ;;
  13) suite=trixie ;;
  *) log "no Debian release ships Python 3.$minor as python3"; exit 1 ;;
esac

make_base() {
  local ref=$1 work
  work=$(mktemp -d)
  # The host's package sources when it runs the same release (they carry its security suite), else mmdebstrap's.
  local sources=()
  if [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = "$suite" ]; then
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
      [ -s "$f" ] && grep -q "^[^#]" "$f" && sources+=("$f")
    done
  fi
  log "making $ref from Debian $suite"
  # libstdc++6: grpcio's extension links it (the official python:3.X-slim has it too).
  mmdebstrap --quiet --variant=essential \
    --include=ca-certificates,python3,python3-venv,python3-pip,libstdc++6 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" 2>/dev/null || true' \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
    --customize-hook='ln -sf /usr/bin/python3 "$1/usr/local/bin/python" && ln -sf /usr/bin/pip3 "$1/usr/local/bin/pip"' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    "$suite" "$work/base.tar" "${sources[@]}" >&2
  podman import --quiet --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' "$work/base.tar" "$ref" >&2
  rm -rf "$work"
}

if [ -n "${KFLARE_BASE_IMAGE:-}" ]; then
  base=$KFLARE_BASE_IMAGE
else
  recipe=$(sed -n '/^make_base()/,/^}/p' "$0" | cat - <(echo "$suite") | sha256sum | cut -c1-12)
  base=localhost/kflare-base:3.$minor-$suite-$recipe
  podman image exists "$base" || make_base "$base"
fi
got=$(podman run --rm --network=none "$base" python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$got" = "3.$minor" ] || { log "$base has Python $got, the Dockerfile's base 3.$minor"; exit 1; }
if [ "${1:-}" = base ]; then
  echo "$base"
  exit 0
fi

# -- the image -----------------------------------------------------------------------------------------------------

context_hash() {
  cd "$root"
  {
    podman image inspect --format '{{.Id}}' "$base"
    sha256sum Dockerfile .dockerignore pyproject.toml requirements/build.lock requirements/run.lock README.md \
      hack/image-rootfs.py
    find app webhooks reconcilers -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z |
      xargs -0 sha256sum
  } | sha256sum | cut -c1-16
}
image=localhost/kflare:$(context_hash)
if podman image exists "$image"; then
  log "reusing $image"
else
  log "building $image on $base"
  start=$(date +%s)
  podman build --quiet --network=host --layers --build-arg "BASE=$base" --tag "$image" "$root" >&2
  log "built in $(( $(date +%s) - start ))s"
fi
log "size: $(podman image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MiB", $1 / 1048576}')"
echo "$image"
