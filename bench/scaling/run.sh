#!/usr/bin/env bash
# How speedmatrix's client scales with cores (docs/scaling.md): the fidelity benchmark
# (bench/fidelity, speedmatrix only) with the client and the sim on different `taskset` splits,
# then one table over every run.
#
#   SPEEDMATRIX_BIN=target/release/speedmatrix bench/scaling/run.sh
#   REPEATS=3 STREAMS=100,1000 SPLITS="1c:0:1:1 2c-shared:0,1:0,1:2" bench/scaling/run.sh
#
# A split is NAME:CLIENT_CPUS:SIM_CPUS:CLIENT_THREADS (taskset lists). On a 2-core machine the
# client can have both cores only by sharing them with the sim; with more cores give each its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${SPEEDMATRIX_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -p speedmatrix
  BIN=target/release/speedmatrix
fi
SPLITS=${SPLITS:-"1c:0:1:1 2c-shared:0,1:0,1:2 1c-shared:0,1:0,1:1"}
STREAMS=${STREAMS:-1,100,1000}
REPEATS=${REPEATS:-2}
DURATION=${DURATION:-10}
runs=()
for r in $(seq 1 "$REPEATS"); do
  for split in $SPLITS; do
    IFS=: read -r name client sim threads <<<"$split"
    echo "== repeat $r, $name: client on CPUs $client ($threads threads), sim on $sim"
    log=$(mktemp)
    CLIENT_CPUS=$client SIM_CPUS=$sim CLIENT_THREADS=$threads TOOLS=speedmatrix STREAMS=$STREAMS \
      DURATION=$DURATION SPEEDMATRIX_BIN=$BIN bench/fidelity/run.sh | tee "$log"
    runs+=("$name=$(sed -n 's/^results: \(.*results.json\),.*/\1/p' "$log")")
    rm -f "$log"
  done
done
python3 bench/scaling/summary.py "${runs[@]}"
