#!/usr/bin/env bash
# Regenerates the hash-pinned lock files of requirements/ from pyproject.toml, for Python 3.11 on every platform
# (universal markers: linux/amd64 and linux/arm64 alike, with the hash of every wheel of each pinned version):
#
#   requirements/build.lock   pip, setuptools and wheel: what [build-system].requires needs, and the installer
#   requirements/dev.lock     the project's dependencies and its `dev` extra (`make venv`)
#   requirements/run.lock     the dependencies alone (the image), at dev.lock's versions
#
#   bash hack/lock.sh             keep the pins that still satisfy pyproject.toml, resolve only what changed
#   bash hack/lock.sh --upgrade   every pin to the newest version pyproject.toml allows (other arguments go to
#                                 `uv pip compile` as well)
#
# Each lock starts with `# inputs: <sha256>`, the digest of the inputs it was made from (see inputs_digest below),
# so that a lock older than pyproject.toml is found without the network (tests/unit/test_locks.py). The resolver,
# uv, is installed into a temporary venv at a pinned version: it only makes the locks, nothing installs it.
set -euo pipefail

UV_VERSION=${UV_VERSION:-0.13.9}
PYTHON=${PYTHON:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
locks=$root/requirements
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log() { echo "lock: $*" >&2; }

log "installing uv $UV_VERSION into a temporary venv"
"$PYTHON" -m venv "$work/uv"
"$work/uv/bin/python" -m pip install --quiet "uv==$UV_VERSION"
uv=$work/uv/bin/uv

# The inputs, from pyproject.toml: build.in (the build backend's requirements and pip) and the digest of
# [build-system].requires, [project].dependencies and the `dev` extra, serialized as JSON with sorted keys. Comments
# and formatting of pyproject.toml change nothing; tests/unit/test_locks.py computes the same digest.
digest=$("$PYTHON" - "$root/pyproject.toml" "$work/build.in" <<'PY'
import hashlib, json, sys, tomllib

with open(sys.argv[1], "rb") as f:
    pyproject = tomllib.load(f)
inputs = {
    "build-system.requires": pyproject["build-system"]["requires"],
    "project.dependencies": pyproject["project"]["dependencies"],
    "project.optional-dependencies.dev": pyproject["project"]["optional-dependencies"]["dev"],
}
with open(sys.argv[2], "w") as f:
    print(*pyproject["build-system"]["requires"], "pip", sep="\n", file=f)
print(hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest())
PY
)

mkdir -p "$locks"
compile() {  # compile LOCK WHAT [uv pip compile arguments...]
  local lock=$1 what=$2
  shift 2
  log "resolving $lock"
  # The lock itself is the output file: uv keeps its pins where they still fit (unless --upgrade).
  (cd "$root" && "$uv" pip compile --quiet --generate-hashes --universal --python-version 3.11 --no-header \
    --output-file "requirements/$lock" "$@")
  {
    echo "# inputs: $digest"
    echo "# $what, hash-pinned from pyproject.toml for Python 3.11; do not edit: regenerate with \`bash hack/lock.sh\`."
    cat "$locks/$lock"
  } > "$work/$lock"
  mv "$work/$lock" "$locks/$lock"
}

# From standard input, so that the lock names no temporary file.
compile build.lock "The build backend and the installer: pip, setuptools and wheel" - "$@" < "$work/build.in"
compile dev.lock "The dependencies and the dev extra (make venv)" pyproject.toml --extra dev "$@"
# The image's dependencies at the versions the tests ran against: dev.lock constrains them.
compile run.lock "The runtime dependencies (the image), at dev.lock's versions" pyproject.toml \
  --constraint requirements/dev.lock "$@"
log "wrote requirements/build.lock, dev.lock and run.lock (inputs $digest)"
