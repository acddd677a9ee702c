#!/usr/bin/env bash
# The replay sender at 1,000 requests/s on one client core, and its memory at 100,000 requests
# (issue 32; docs/performance.md). The client on CPU 0 with one worker thread, the sim on CPU 1.
#
#   SPEEDMATRIX_BIN=target/release/speedmatrix bench/replay/run.sh
#   REQUESTS=10000 RATE=2000 CLIENT_CPUS=2 SIM_CPUS=3 bench/replay/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SPEEDMATRIX_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -p speedmatrix
  BIN=target/release/speedmatrix
fi
OUT=${OUT:-$(mktemp -d /tmp/sm-replay-bench.XXXXXX)}
mkdir -p "$OUT"
{
  echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  echo "load before: $(uptime)"
  echo "version: $("$BIN" --version)"
} | tee "$OUT/machine.txt"
python3 bench/replay/bench.py --bin "$BIN" --out "$OUT" --requests "${REQUESTS:-10000,100000}" \
  --rate "${RATE:-1000}" --client-cpus "${CLIENT_CPUS:-0}" --sim-cpus "${SIM_CPUS:-1}"
echo "load after: $(uptime)" | tee -a "$OUT/machine.txt"
echo "results: $OUT/results.json"
