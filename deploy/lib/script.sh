# shellcheck shell=bash
# Shared by the deploy/local-*.sh scripts: their messages and checks. Source it after setting
# PROG (the script's name in messages).

die() {
  echo "$PROG: $*" >&2
  exit 1
}
say() { echo "$PROG: $*" >&2; }

# usage_lines FIRST LAST: the script's header comment lines FIRST..LAST as its usage; exits 2.
usage_lines() {
  sed -n "$1,$2p" "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# need_root [WHY]
need_root() {
  [ "$(id -u)" -eq 0 ] || die "must run as root${1:+ ($1)}"
}

# need_tools_from PACKAGES TOOL...: every TOOL on PATH, or the first one missing named with the
# packages that bring it.
need_tools_from() {
  local packages=$1 t
  shift
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' is not installed (run deploy/install-deps.sh: $packages)"
  done
}
