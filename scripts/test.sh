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
ROOT=$PWD
WORK=$ROOT/.work
mkdir -p "$WORK"
export CARGO_TERM_COLOR=never
# parts of the suite that were skipped, one a line, printed at the end
export SPEEDMATRIX_SKIPPED=$WORK/skipped.txt
: >"$SPEEDMATRIX_SKIPPED"

step() { printf '\n==> %s\n' "$*"; }

step "toolchain"
for c in rustfmt clippy; do
  if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$c"
  fi
done
cargo --version

step "format (cargo fmt --check)"
cargo fmt --all -- --check

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
VENV=$WORK/venv
REQS=tests/python/requirements.txt
# the venv is stamped with its requirements' hash: an edited requirements file rebuilds it
REQS_SHA=$(sha256sum "$REQS" | cut -d' ' -f1)
if [ ! -x "$VENV/bin/pytest" ] || [ "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" != "$REQS_SHA" ]; then
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    # Debian ships venv (and the pip it bootstraps) as a separate package
    echo "test.sh: installing Debian's python3-venv"
    rm -rf "$VENV"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQS"
  echo "$REQS_SHA" >"$VENV/.requirements.sha256"
fi

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
