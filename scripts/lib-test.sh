#!/usr/bin/env bash
# Tests the build cache of scripts/lib.sh with small stand-in artefacts (seconds, no network): a
# first call builds, a second is a hit, a changed input is a new key, an interrupted or failed
# build leaves nothing that counts as an entry, two callers of one key build once, a venv
# built in its entry works through the entry's path, and the engine scripts' tools venv is
# found whatever the caller's own variables are named. Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEEDMATRIX_CACHE=$(mktemp -d "${TMPDIR:-/tmp}/speedmatrix-lib-test.XXXXXX")
export SPEEDMATRIX_CACHE
trap 'rm -rf "$SPEEDMATRIX_CACHE"' EXIT
# shellcheck source=lib.sh
source scripts/lib.sh
LOGS=$SPEEDMATRIX_CACHE/logs
mkdir -p "$LOGS"
FAILED=0
check() { # check WHAT COMMAND…: one named assertion
  local what=$1
  shift
  if "$@"; then
    echo "lib-test: ok: $what"
  else
    echo "lib-test: FAIL: $what"
    FAILED=1
  fi
}
builds() { wc -l <"$SPEEDMATRIX_CACHE/builds"; }
said() { grep -q "$2" "$LOGS/$1"; }
no_entry() { ! [ -e "$1" ] && ! [ -L "$1" ]; }
quietly() { "$@" >/dev/null; }
leftovers() { find "$SPEEDMATRIX_CACHE/fake" -maxdepth 1 -name "$(cache_key "$1").??????" | wc -l; }
# status_of CMD…: runs CMD in a subshell with errexit on and sets RC to its status, without
# stopping this script. Called as a plain command: after || bash would ignore errexit inside.
status_of() {
  set +e
  (
    set -e
    "$@"
  )
  RC=$?
  set -e
}
: >"$SPEEDMATRIX_CACHE/builds"
build_fake() {
  echo built >>"$SPEEDMATRIX_CACHE/builds"
  sleep "${SLOW:-0}"
  echo "artefact $2" >"$1/artefact"
}

cache_ensure fake "version 1" build_fake v1 2>"$LOGS/cold"
check "a first call builds" said cold 'fake: building (key'
check "the entry holds the artefact" test "$(cat "$CACHE_DIR/artefact")" = "artefact v1"
check "the entry holds its key's text" test "$(cat "$CACHE_DIR/key.txt")" = "version 1"
cache_ensure fake "version 1" build_fake v1 2>"$LOGS/hit"
check "a second call is a hit" said hit 'fake: cached (key'
check "a hit does not build" test "$(builds)" = 1

cache_ensure fake "version 2" build_fake v2 2>"$LOGS/changed"
check "a changed input is a new key and builds" said changed 'fake: building (key'
check "the changed entry holds the new artefact" test "$(cat "$CACHE_DIR/artefact")" = "artefact v2"

# Killed halfway: the half-built directory is left, but it is no entry.
(SLOW=30 cache_ensure fake "version 3" build_fake v3 2>/dev/null) &
victim=$!
for _ in $(seq 1 100); do
  [ "$(leftovers "version 3")" = 0 ] || break
  sleep 0.1
done
# The caller first, as when a whole job is killed: killing the builder alone would let the caller
# notice and clean up. Then the builder and its sleep, which would otherwise outlive the test.
kids=$(pgrep -P "$victim" || true)
kill -KILL "$victim" 2>/dev/null || true
wait "$victim" 2>/dev/null || true
for kid in $kids; do
  pkill -KILL -P "$kid" 2>/dev/null || true
  kill -KILL "$kid" 2>/dev/null || true
done
check "an interrupted build leaves its directory" test "$(leftovers "version 3")" = 1
check "an interrupted build is not a hit" no_entry "$(cache_path fake "$(cache_key "version 3")")"
cache_ensure fake "version 3" build_fake v3 2>"$LOGS/after-kill"
check "the next call builds it again" said after-kill 'fake: building'
check "and removes what the interrupted build left" test "$(leftovers "version 3")" = 1
check "and publishes it" cache_hit fake "$(cache_key "version 3")"

build_fail() {
  echo half >"$1/half"
  exit 75
}
status_of cache_ensure fake "version 4" build_fail 2>"$LOGS/fail"
check "a failed build returns the builder's exit code" test "$RC" = 75
check "a failed build leaves nothing" test "$(leftovers "version 4")" = 0
check "a failed build is not a hit" no_entry "$(cache_path fake "$(cache_key "version 4")")"

build_midway() {
  false
  echo reached >"$1/artefact"
}
status_of cache_ensure fake "version 5" build_midway 2>"$LOGS/midway"
check "a failing step inside the builder fails the build" test "$RC" = 1
check "and says so" said midway 'fake: build failed (exit 1)'
# shellcheck disable=SC2016 # the inner shell expands it
status_of bash -c 'source scripts/lib.sh; f() { cache_ensure fake "version 5" true; }; f || true' 2>"$LOGS/ignored"
check "a call where bash ignores errexit is refused" said ignored 'call it as a plain command'
check "and nothing is published" no_entry "$(cache_path fake "$(cache_key "version 5")")"

: >"$SPEEDMATRIX_CACHE/builds"
(SLOW=2 cache_ensure fake "version 6" build_fake v6 2>"$LOGS/first") &
a=$!
(SLOW=2 cache_ensure fake "version 6" build_fake v6 2>"$LOGS/second") &
b=$!
wait "$a" "$b"
check "two callers of one key build it once" test "$(builds)" = 1
check "and the other uses it" grep -qh "fake: cached" "$LOGS/first" "$LOGS/second"

build_venv() { make_venv python3 "$1"; }
cache_ensure venv "venv 1" build_venv 2>/dev/null
entry=$(cache_path venv "$(cache_key "venv 1")")
check "a venv built in its entry runs through the entry's path" quietly "$entry/bin/pip" --version
check "and is a venv there" "$entry/bin/python" -c 'import sys; assert sys.prefix != sys.base_prefix'

# The engine scripts' tools venv, asked for with the caller's own TOOLS in the environment (as
# `TOOLS=speedmatrix,vllm bench/fidelity/run.sh` runs vllm-cpu.sh): the scripts still set UV.
# cache_ensure is a stand-in here: the real tools venv needs the network.
# shellcheck disable=SC2016 # the inner shell expands it
tools_uv() {
  TOOLS=speedmatrix,vllm SPEEDMATRIX_ENGINES_DIR=$SPEEDMATRIX_CACHE/engines bash -c 'set -euo pipefail
    source scripts/engines/common.sh
    cache_ensure() { CACHE_DIR=$SPEEDMATRIX_CACHE/tools; }
    ensure_tools
    echo "$UV"'
}
check "a caller's TOOLS does not stop the engine scripts setting UV" \
  test "$(tools_uv 2>"$LOGS/tools")" = "$SPEEDMATRIX_CACHE/tools/bin/uv"

[ "$FAILED" = 0 ] || exit 1
echo "lib-test: all passed"
