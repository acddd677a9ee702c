#!/usr/bin/env bash
# Runs every test of speedmatrix, from a plain clone on a fresh machine: installs what is
# missing (Rust components, a Python virtual environment, Chromium), checks formatting and
# lints, builds, and runs the Rust, Python and browser tests. Exits non-zero on any failure.
#
#   scripts/test.sh                 everything
#   SKIP_BROWSER=1 scripts/test.sh  without the headless-Chromium page test (local use only)
#   SKIP_REAL_ENGINES=1 scripts/test.sh   without the real vLLM and llama.cpp servers (local use only)
#   SKIP_LLAMACPP=1 scripts/test.sh       without llama.cpp's server only (local use only)
# Under CI=true (.ci/run sets it) the SKIP_* variables are ignored. Whatever was skipped anyway
# (llama.cpp when it cannot be built for a reason outside the project) is listed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source scripts/lib.sh
ROOT=$PWD
WORK=$ROOT/.work
mkdir -p "$WORK"
export CARGO_TERM_COLOR=never
if [ "${CI:-}" = true ]; then
  # A CI machine builds everything once, from a clean clone, on a disk it shares: incremental
  # caches (about half of a debug target) and full debug info in every dependency only take
  # space there (the hand-in of 2026-12-07 ran out of it while linking). Panics keep file and
  # line with line tables.
  export CARGO_INCREMENTAL=0
  export CARGO_PROFILE_DEV_DEBUG=line-tables-only
fi
# parts of the suite that were skipped, one a line, printed at the end
export SPEEDMATRIX_SKIPPED=$WORK/skipped.txt
: >"$SPEEDMATRIX_SKIPPED"

step "toolchain"
for c in rustfmt clippy; do
  if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$c"
  fi
done
cargo --version

step "shell library (the build cache: keys, hits, interrupted and concurrent builds)"
scripts/lib-test.sh

step "format (cargo fmt --check)"
cargo fmt --all -- --check

step "import circles (no two files of a crate import each other, directly or around a circle)"
python3 scripts/import-cycles.py --self-test
python3 scripts/import-cycles.py

step "lints (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "build"
cargo build --workspace --all-targets --locked

step "Rust tests (unit, integration, end-to-end against the simulated engine; the site also on PostgreSQL)"
# postgres-test.sh installs and starts a private PostgreSQL cluster for the site's tests, runs the
# command, and stops the cluster on every exit path
scripts/postgres-test.sh cargo test --workspace --locked --no-fail-fast

step "real engines (vLLM CPU build, llama.cpp server) — scripts/engines/real-engine-tests.sh"
scripts/engines/real-engine-tests.sh

step "Python environment (the official openai client, pytest, jsonschema)"
REQS=tests/python/requirements.txt
# Kept in the cache, keyed by the requirements and the interpreter: an edited requirements file
# gets a new venv, and a fresh clone on this machine reuses the one it has.
build_test_venv() {
  make_venv python3 "$1"
  "$1/bin/pip" install --quiet --disable-pip-version-check -r "$REQS"
}
cache_ensure test-venv "$(printf 'test venv\npython %s\n' "$(python_id python3)"; cat "$REQS"; declare -f build_test_venv make_venv)" \
  build_test_venv
VENV=$CACHE_DIR

step "Python tests (real third-party clients against speedmatrix)"
SPEEDMATRIX_BIN=$ROOT/target/debug/speedmatrix "$VENV/bin/pytest" -q tests/python

if [ "${SKIP_BROWSER:-}" = 1 ] && [ "${CI:-}" != true ]; then
  step "browser test skipped (SKIP_BROWSER=1)"
  echo "browser tests (SKIP_BROWSER=1)" >>"$SPEEDMATRIX_SKIPPED"
elif [ -x scripts/browser-test.sh ]; then
  step "browser test (headless Chromium opens the report page offline)"
  scripts/browser-test.sh
  step "site browser test (headless Chromium: runs list, filter, run, compare, upload form)"
  scripts/site-browser-test.sh
fi

if [ -s "$SPEEDMATRIX_SKIPPED" ]; then
  step "all tests that ran passed; SKIPPED:"
  sed 's/^/    - /' "$SPEEDMATRIX_SKIPPED"
else
  step "all tests passed"
fi
