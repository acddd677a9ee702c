#!/usr/bin/env bash
# Runs every test of speedmatrix, from a plain clone on a fresh machine: installs what is
# missing (Rust components, a Python virtual environment, Chromium), checks formatting and
# lints, builds, and runs the Rust, Python and browser tests. Exits non-zero on any failure.
#
#   scripts/test.sh                 everything
#   SKIP_BROWSER=1 scripts/test.sh  without the headless-Chromium page test (local use only)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/.work
mkdir -p "$WORK"
export CARGO_TERM_COLOR=never

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
if [ ! -x "$VENV/bin/pytest" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r tests/python/requirements.txt
fi

step "Python tests (real third-party clients against speedmatrix)"
SPEEDMATRIX_BIN=$ROOT/target/debug/speedmatrix "$VENV/bin/pytest" -q tests/python

if [ "${SKIP_BROWSER:-}" = 1 ] && [ "${CI:-}" != true ]; then
  step "browser test skipped (SKIP_BROWSER=1)"
elif [ -x scripts/browser-test.sh ]; then
  step "browser test (headless Chromium opens the report page offline)"
  scripts/browser-test.sh
  step "site browser test (headless Chromium: runs list, filter, run, compare, upload form)"
  scripts/site-browser-test.sh
fi

step "all tests passed"
