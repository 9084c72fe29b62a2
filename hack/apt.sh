# shellcheck shell=bash
# Sourced by the hack scripts: `apt_install PKG...` installs Debian's packages PKG (none: nothing), as root, one
# install at a time across worktrees and scripts.
apt_install() {
  [ $# -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || { echo "apt: needs root to install $* (or install them yourself)" >&2; exit 1; }
  local lock_dir=${XDG_CACHE_HOME:-$HOME/.cache}/kflare
  mkdir -p "$lock_dir"
  (
    exec 8>"$lock_dir/.apt.lock"
    flock 8
    echo "apt: installing $*" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "$@" >&2
  )
}
