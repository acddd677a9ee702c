# What the test and engine scripts share (sourced, not run): section headers, installing Debian
# packages, free disk and free ports, Python venvs, headless Chromium, and the cache of things
# that are expensive to build (the llama-server binary, the vLLM and Python venvs, the models).
# shellcheck shell=bash

# step TEXT: a section header, so that a long log shows where each part starts, with the time
# since the script started, so that it also shows where the minutes go.
step() { printf '\n==> %s  [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

# lib_die TEXT: what went wrong and what to do, on stderr, then exit 1.
lib_die() {
  printf '%s: ERROR: %s\n' "$(basename "$0")" "$*" >&2
  exit 1
}

# apt_install PKG…: installs Debian packages quietly, with sudo when not root. The package index
# is refreshed once per script, the first time something is missing.
apt_install() {
  command -v apt-get >/dev/null || lib_die "needs the packages $*, and there is no apt-get here: install them"
  local sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  printf '%s: installing Debian packages: %s\n' "$(basename "$0")" "$*" >&2
  if [ -z "${LIB_APT_UPDATED:-}" ]; then
    $sudo apt-get update -qq || return 1
    LIB_APT_UPDATED=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# need_disk GB WHAT DIR: fail early with a clear message rather than leave a half-written venv.
need_disk() {
  local need_gb=$1 what=$2 dir=$3 avail_kb
  mkdir -p "$dir"
  avail_kb=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
  if [ "${avail_kb:-0}" -lt $((need_gb * 1024 * 1024)) ]; then
    lib_die "not enough free disk for $what: need about ${need_gb} GB under $dir, have $((avail_kb / 1024)) MB (df -h $dir)"
  fi
}

# make_venv PY DIR: `PY -m venv DIR`. A fresh Debian or Ubuntu has python3 without its venv
# module (ensurepip lives in python3-venv): install that package once, then try again.
make_venv() {
  local py=$1 dir=$2 err pkg
  err=$("$py" -m venv "$dir" 2>&1) && return
  rm -rf "$dir"
  pkg="python$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
  command -v apt-get >/dev/null || lib_die "$py cannot make a venv and there is no apt-get: install its venv module ($err)"
  apt_install python3-venv "$pkg" || apt_install python3-venv || lib_die "could not install python3-venv with apt-get"
  "$py" -m venv "$dir"
}

# python_id PY: the interpreter a venv is bound to (its place and exact version), for cache keys.
python_id() {
  "$1" -c 'import sys; print(sys.base_prefix, sys.version.replace("\n", " "))'
}

# --- Headless Chromium ---------------------------------------------------------------------------

# find_chromium: sets and exports CHROMIUM to the browser's command, installing Debian's chromium
# when there is none.
find_chromium() {
  local c
  for c in "${CHROMIUM:-}" chromium chromium-browser; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then
      export CHROMIUM=$c
      return
    fi
  done
  apt_install chromium || lib_die "could not install chromium with apt-get"
  export CHROMIUM=chromium
}

# The flags of every headless run: no GPU, no first-run or sync chatter, the page's console on
# stderr. A script adds its own network rules (NO_NETWORK) so that nothing leaves the machine.
CHROMIUM_FLAGS=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
  --no-first-run --disable-sync --disable-extensions --disable-default-apps --mute-audio
  --hide-scrollbars --enable-logging=stderr --v=0 --virtual-time-budget=3000)

# chromium_run LOG ARGS…: one headless Chromium with a fresh profile and CHROMIUM_FLAGS; stdout
# goes to LOG.out, stderr (the console) to LOG. A browser that fails is judged by its logs.
chromium_run() {
  local log=$1 profile
  shift
  profile=$(mktemp -d)
  timeout 120 "$CHROMIUM" "${CHROMIUM_FLAGS[@]}" --user-data-dir="$profile" "$@" >"$log.out" 2>"$log" || true
  rm -rf "$profile"
}

# --- The cache of build and install artefacts ----------------------------------------------------
#
# What takes minutes to make and never changes once made (the llama-server binary, the vLLM venv,
# the tools and test venvs, the models) lives outside the checkout, so that a fresh clone on a
# machine that already built it reuses it:
#
#   SPEEDMATRIX_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/speedmatrix)/NAME/KEY
#
# KEY is the sha256 (first 16 hex digits) of a text that names exactly what determines the entry:
# pinned versions, lock files, build flags, the interpreter, and the shell function that builds
# it. Change any of them and the key changes, so the old entry is simply not found. Each entry
# holds key.txt, the text behind its key.
#
# An entry is complete or absent. It is built in a directory of its own, NAME/KEY.XXXXXX, and
# only a finished build is published, by renaming a symlink NAME/KEY -> KEY.XXXXXX into place
# (rename(2) is atomic). The build stays where it was built because a venv has its own absolute
# path written into its scripts: a venv cannot be moved, but a symlink to it can appear at once.
# A build that was interrupted leaves a KEY.XXXXXX without a symlink; it is never used and is
# removed by the next build of that key. A lock per key makes a second caller wait for the first
# build instead of building the same thing twice.

SPEEDMATRIX_CACHE=${SPEEDMATRIX_CACHE:-${XDG_CACHE_HOME:-${HOME:?set HOME or SPEEDMATRIX_CACHE}/.cache}/speedmatrix}
# Resolved once and exported: the engine scripts point XDG_CACHE_HOME at their work directory
# for the servers' own caches, and the scripts they start must still find this cache.
export SPEEDMATRIX_CACHE
# A venv keeps the path it was built at: a relative one would break as soon as a script cd's.
case $SPEEDMATRIX_CACHE in
  /*) ;;
  *) lib_die "SPEEDMATRIX_CACHE must be an absolute path, not '$SPEEDMATRIX_CACHE'" ;;
esac

# cache_key TEXT: the key of an entry whose inputs TEXT describes.
cache_key() { printf '%s' "$1" | sha256sum | cut -c1-16; }

# cache_path NAME KEY: where the entry would be (whether or not it exists).
cache_path() { printf '%s/%s/%s\n' "$SPEEDMATRIX_CACHE" "$1" "$2"; }

# cache_hit NAME KEY: true when the entry exists (only complete entries have a symlink).
cache_hit() { [ -L "$(cache_path "$1" "$2")" ] && [ -f "$(cache_path "$1" "$2")/key.txt" ]; }

# cache_ensure NAME KEYTEXT BUILDER [ARGS…]: makes sure the entry NAME for KEYTEXT exists, running
# `BUILDER DIR ARGS…` to build it into DIR when it does not, and prints one line saying which
# (on stderr, so that CI logs show it). Sets CACHE_DIR to the entry's real directory. BUILDER
# runs in a subshell with errexit on, must write into DIR only, and fails by any failing command;
# a failed build is removed and its exit code returned.
# Call cache_ensure as a plain command, not after if, !, && or ||: there bash switches errexit off
# for everything the function runs, even after `set -e`, so a build step that failed would go on
# and could publish a broken entry. cache_ensure checks this and refuses.
cache_ensure() {
  local name=$1 text=$2 builder=$3
  shift 3
  local key link fd='' tmp t0 rc old errexit='' probe
  [[ $- != *e* ]] || errexit=1
  set +e
  (
    set -e
    false
    true
  )
  probe=$?
  [ -z "$errexit" ] || set -e
  [ "$probe" != 0 ] || lib_die "cache_ensure $name was called after if, !, && or || (bash ignores errexit there): call it as a plain command"
  key=$(cache_key "$text")
  link=$(cache_path "$name" "$key")
  mkdir -p "$SPEEDMATRIX_CACHE/$name"
  if ! cache_hit "$name" "$key"; then
    exec {fd}>"$link.lock"
    flock "$fd"
  fi
  if cache_hit "$name" "$key"; then
    [ -z "$fd" ] || exec {fd}>&-
    CACHE_DIR=$(readlink -f "$link")
    printf '[cache] %s: cached (key %s) %s\n' "$name" "$key" "$CACHE_DIR" >&2
    return 0
  fi
  # Builds of this key that an earlier run left unfinished (we hold the lock: none is running).
  for old in "$link".?????? "$link".new.*; do
    if [ -e "$old" ] || [ -L "$old" ]; then rm -rf "$old"; fi
  done
  tmp=$(mktemp -d "$link.XXXXXX")
  chmod 755 "$tmp" # mktemp's 700 would hide a shared cache from other users
  printf '[cache] %s: building (key %s) in %s\n' "$name" "$key" "$tmp" >&2
  t0=$(date +%s)
  set +e
  (
    set -e
    "$builder" "$tmp" "$@"
  ) >&2
  rc=$?
  [ -z "$errexit" ] || set -e
  if [ "$rc" != 0 ]; then
    rm -rf "$tmp"
    exec {fd}>&-
    printf '[cache] %s: build failed (exit %s); nothing was cached\n' "$name" "$rc" >&2
    return "$rc"
  fi
  printf '%s\n' "$text" >"$tmp/key.txt"
  ln -s "$(basename "$tmp")" "$link.new.$$"
  mv -T "$link.new.$$" "$link"
  exec {fd}>&-
  CACHE_DIR=$tmp
  printf '[cache] %s: built in %s s (key %s) %s\n' "$name" "$(($(date +%s) - t0))" "$key" "$CACHE_DIR" >&2
}
