#!/usr/bin/env bash
# The fidelity benchmark: speedmatrix, AIPerf, guidellm and `vllm bench serve` against the simulated
# engine's ground truth. See docs/fidelity.md. Not part of CI (crates/speedmatrix/tests/cli/fidelity.rs is its reduced form).
#
#   bench/fidelity/run.sh                 the full table: 1, 10, 100, 1,000 streams × 4 tools, 10,000 streams (speedmatrix)
#   bench/fidelity/run.sh --quick         speedmatrix only, 1, 100 and 1,000 streams, 5 s windows
#   TOOLS=speedmatrix,vllm STREAMS=100 bench/fidelity/run.sh     a subset
#   TOOLS=speedmatrix,floor STREAMS=1000 bench/fidelity/run.sh   beside the floor: bench/read-floor, a reader that only counts
#   SPEEDMATRIX_BIN=target/release/speedmatrix bench/fidelity/run.sh   use this binary, build nothing
#   CLIENT_CPUS=0,1 SIM_CPUS=0,1 CLIENT_THREADS=2 TOOLS=speedmatrix bench/fidelity/run.sh   other cores (docs/scaling.md)
#
# Writes .work/fidelity/<UTC time>/ (results.json, table.md, every run's trace, logs and outputs).
# The peers are installed, pinned, into .work/peers/<tool>/ (uv); vllm is the vllm-cpu venv that
# scripts/engines/vllm-cpu.sh installs into the cache (docs/real-engines.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TOOLS=${TOOLS:-speedmatrix,vllm,aiperf,guidellm}
STREAMS=${STREAMS:-1,10,100,1000,10000}
DURATION=${DURATION:-10}
if [ "${1:-}" = "--quick" ]; then
  TOOLS=${TOOLS_QUICK:-speedmatrix} STREAMS=1,100,1000 DURATION=5
fi
OUT=$ROOT/.work/fidelity/$(date -u +%Y%m%dT%H%M%SZ)
PEERS=$ROOT/.work/peers
mkdir -p "$OUT" "$PEERS"

BIN=${SPEEDMATRIX_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release -p speedmatrix
  BIN=target/release/speedmatrix
fi

# Pinned peers. vllm bench serve is vllm-cpu's, installed by scripts/engines/vllm-cpu.sh.
AIPERF=aiperf==0.13.0 GUIDELLM=guidellm==0.8.1
# shellcheck source=../../scripts/lib.sh
source scripts/lib.sh
export UV_CACHE_DIR=${UV_CACHE_DIR:-$SPEEDMATRIX_CACHE/uv} UV_LINK_MODE=hardlink UV_PYTHON_DOWNLOADS=never
export HF_HOME=$PEERS/hf XDG_CACHE_HOME=$PEERS/cache TMPDIR=${TMPDIR:-/tmp} HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
install_peer() { # NAME SPEC: a venv per tool, installed once per pinned version, 15 min at most
  local dir=$PEERS/$1 spec=$2
  [ "$(cat "$dir/.pinned" 2>/dev/null)" = "$spec" ] && return 0
  local uv
  uv=$(scripts/engines/vllm-cpu.sh path tools)/bin/uv
  rm -rf "$dir"
  "$uv" venv -q -p python3.11 "$dir"
  timeout 900 "$uv" pip install -q -p "$dir/bin/python" "$spec"
  echo "$spec" >"$dir/.pinned"
}
case ",$TOOLS," in *,aiperf,*) install_peer aiperf "$AIPERF" ;; esac
case ",$TOOLS," in *,guidellm,*) install_peer guidellm "$GUIDELLM" ;; esac
FLOOR=
case ",$TOOLS," in *,floor,*)
  cargo build --release -p sm-client --example read_floor
  FLOOR=target/release/examples/read_floor
  ;;
esac
VLLM=
case ",$TOOLS," in *,vllm,*)
  scripts/engines/vllm-cpu.sh install
  VLLM=$(scripts/engines/vllm-cpu.sh path venv)/bin/vllm
  ;;
esac

# The peers' local tokenizer, counting exactly like the sim.
"$BIN" sim --profile bench/fidelity/fidelity.toml --write-tokenizer "$OUT/tokenizer" >/dev/null

# 10,000 streams need 10,000 sockets on each side.
ulimit -n 1048576 2>/dev/null || ulimit -n 65536 2>/dev/null || true
{
  echo "nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  echo "load before: $(uptime)"
  echo "versions: $("$BIN" --version 2>/dev/null || echo speedmatrix ?); $AIPERF; $GUIDELLM; vllm $("$VLLM" --version 2>/dev/null | tail -1 || echo '?')"
} | tee "$OUT/machine.txt"
python3 bench/fidelity/fidelity.py --bin "$BIN" --out "$OUT" --tools "$TOOLS" --streams "$STREAMS" \
  --duration "$DURATION" --tokenizer "$OUT/tokenizer" ${VLLM:+--vllm "$VLLM"} ${FLOOR:+--floor-bin "$FLOOR"} --peers "$PEERS" | tee "$OUT/table.md.log"
echo "load after: $(uptime)" | tee -a "$OUT/machine.txt"
echo "results: $OUT/results.json, $OUT/table.md"
