#!/usr/bin/env bash
# llama.cpp's C++ server (llama-server), built from the llama.cpp tree vendored in the
# llama-cpp-python 0.3.36 source package on PyPI, serving the tiny model as GGUF.
#
#   scripts/engines/llamacpp.sh build                      download, build llama-server, make the GGUF
#   scripts/engines/llamacpp.sh install                    the same
#   scripts/engines/llamacpp.sh start [NAME [PORT [ARGS…]]] serve on 127.0.0.1 (default: llamacpp 8023)
#   scripts/engines/llamacpp.sh stop [NAME]
#   scripts/engines/llamacpp.sh url [NAME]
#
# The server runs with --metrics, 8 slots (SLOTS) sharing a unified KV cache of CTX tokens
# (default 131072), one thread. ARGS are added to its command line.
# Exit code 75 from build/install: it failed for a reason outside the project (the registry is
# unreachable, no C or C++ compiler); callers may skip llama.cpp. A cmake configure or compile
# failure exits 1: the pins and flags are the project's, so that is a failure to fix, not a skip.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

VERSION=0.3.36
LC=$WORK/llamacpp
BIN=$LC/build/bin/llama-server
GGUF=$WORK/models/tiny.gguf
EXTERNAL=75

build() {
  if [ -x "$BIN" ]; then
    say "llama-server already built ($BIN)"
    return
  fi
  need_disk 2 "the llama.cpp build tree (~0.7 GB)"
  local tool
  for tool in cc c++; do
    command -v "$tool" >/dev/null || {
      say "no C/C++ compiler ($tool) on PATH"
      exit $EXTERNAL
    }
  done
  ensure_tools
  mkdir -p "$LC/dl"
  local sdist=$LC/dl/llama_cpp_python-$VERSION.tar.gz
  if [ ! -f "$sdist" ]; then
    say "downloading the llama-cpp-python $VERSION source package (76 MB)"
    # --no-binary on this package only: for all packages it would build cmake itself from source.
    "$TOOLS/bin/pip" download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$LC/dl" || {
      say "could not download llama-cpp-python==$VERSION from the package registry"
      exit $EXTERNAL
    }
  fi
  rm -rf "$LC/src"
  mkdir -p "$LC/src"
  tar xzf "$sdist" -C "$LC/src" --strip-components=1
  local t0 jobs=${JOBS:-$(nproc)}
  t0=$(date +%s)
  say "building llama-server with $jobs jobs (about 4 minutes on 2 cores); log $WORK/logs/llamacpp-build.log"
  # LLAMA_USE_PREBUILT_UI=OFF: ON downloads the web UI from a hub at configure time.
  if ! PATH=$TOOLS/bin:$PATH cmake -S "$LC/src/vendor/llama.cpp" -B "$LC/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DGGML_CCACHE=OFF \
    >"$WORK/logs/llamacpp-build.log" 2>&1 ||
    ! PATH=$TOOLS/bin:$PATH cmake --build "$LC/build" --target llama-server -j "$jobs" \
      >>"$WORK/logs/llamacpp-build.log" 2>&1; then
    tail -n 40 "$WORK/logs/llamacpp-build.log" >&2
    say "the pinned llama.cpp tree did not configure or compile (log $WORK/logs/llamacpp-build.log)"
    rm -rf "$LC/build"
    exit 1
  fi
  say "llama-server built in $(($(date +%s) - t0)) s"
}

make_gguf() {
  [ -f "$GGUF" ] && return
  ensure_tools
  local tok=$WORK/models/tokenizer
  [ -f "$tok/tokenizer.json" ] || "$TOOLS/bin/python" "$ENGINES_SRC/make_model.py" --tokenizer-only "$tok"
  "$TOOLS/bin/python" "$ENGINES_SRC/make_gguf.py" "$tok" "$GGUF.part"
  mv "$GGUF.part" "$GGUF"
}

start() {
  local name=${1:-llamacpp} port=${2:-8023}
  shift $(($# < 2 ? $# : 2))
  [ -x "$BIN" ] || die "llama-server is not built: run scripts/engines/llamacpp.sh build"
  make_gguf
  if [ -f "$WORK/run/$name.pid" ] && kill -0 "$(cat "$WORK/run/$name.pid")" 2>/dev/null; then
    die "$name is already running (pid $(cat "$WORK/run/$name.pid")); stop it first"
  fi
  local log=$WORK/logs/llamacpp-$name.log url=http://127.0.0.1:$port
  say "starting llama-server $name on $url; log $log"
  start_bg "$name" "$log" "$BIN" -m "$GGUF" -a tiny-llama --host 127.0.0.1 --port "$port" \
    -c "${CTX:-131072}" -np "${SLOTS:-8}" -kvu --metrics -t 1 -tb 1 --no-webui --offline "$@"
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
  build | install)
    build
    make_gguf
    ;;
  start) start "$@" ;;
  stop) stop_server "${1:-llamacpp}" ;;
  url) server_url "${1:-llamacpp}" ;;
  *)
    sed -n '2,15p' "$0" >&2
    exit 2
    ;;
esac
