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
# The binary and the GGUF are kept in the build cache (SPEEDMATRIX_CACHE, default
# ~/.cache/speedmatrix; docs/real-engines.md): a second build on this machine takes seconds.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

VERSION=0.3.36
EXTERNAL=75
# LLAMA_USE_PREBUILT_UI=OFF: ON downloads the web UI from a hub at configure time.
CMAKE_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DGGML_CCACHE=OFF)

# build_llama_server DIR: downloads the pinned source, builds llama-server, keeps DIR/bin/llama-server
# (a static build: it needs nothing of the build tree) and removes the rest.
build_llama_server() {
  local dir=$1 tool jobs=${JOBS:-$(nproc)} t0 log=$WORK/logs/llamacpp-build.log
  for tool in cc c++; do
    command -v "$tool" >/dev/null || {
      say "no C/C++ compiler ($tool) on PATH"
      exit $EXTERNAL
    }
  done
  need_disk 2 "the llama.cpp build tree (~0.7 GB)" "$dir"
  say "downloading the llama-cpp-python $VERSION source package (76 MB)"
  # --no-binary on this package only: for all packages it would build cmake itself from source.
  "$ENGINE_TOOLS_VENV/bin/pip" download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$dir/dl" || {
    say "could not download llama-cpp-python==$VERSION from the package registry"
    exit $EXTERNAL
  }
  mkdir -p "$dir/src"
  tar xzf "$dir/dl/llama_cpp_python-$VERSION.tar.gz" -C "$dir/src" --strip-components=1
  t0=$(date +%s)
  say "building llama-server with $jobs jobs (about 4 minutes on 2 idle cores); log $log"
  if ! PATH=$ENGINE_TOOLS_VENV/bin:$PATH cmake -S "$dir/src/vendor/llama.cpp" -B "$dir/build" "${CMAKE_FLAGS[@]}" >"$log" 2>&1 ||
    ! PATH=$ENGINE_TOOLS_VENV/bin:$PATH cmake --build "$dir/build" --target llama-server -j "$jobs" >>"$log" 2>&1; then
    tail -n 40 "$log" >&2
    say "the pinned llama.cpp tree did not configure or compile (log $log)"
    exit 1
  fi
  mkdir -p "$dir/bin"
  cp "$dir/build/bin/llama-server" "$dir/bin/"
  rm -rf "$dir/dl" "$dir/src" "$dir/build"
  say "llama-server built in $(($(date +%s) - t0)) s"
}

# Everything that decides the binary: the pinned source and flags, cmake and ninja, the compiler
# and C library, and the CPU (GGML_NATIVE builds for this machine's instruction set, so a cache
# shared with another CPU must not hand it this binary).
llama_key() {
  printf 'llama-server\nllama-cpp-python %s\n%s\n%s\n' "$VERSION" "${CMAKE_FLAGS[*]}" "$(grep -E '^(cmake|ninja)==' "$TOOLS_LOCK")"
  printf 'cc %s\nc++ %s\nlibc %s\n' "$(cc --version 2>/dev/null | head -n1)" "$(c++ --version 2>/dev/null | head -n1)" \
    "$(getconf GNU_LIBC_VERSION 2>/dev/null || true)"
  printf 'cpu %s %s\n' "$(uname -m)" "$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | tr ' ' '\n' | sort | tr '\n' ' ')"
  declare -f build_llama_server
}

# build_gguf DIR: the tiny model as GGUF (DIR/tiny.gguf), with the tokenizer of make_model.py.
build_gguf() {
  local dir=$1
  "$ENGINE_TOOLS_VENV/bin/python" "$ENGINES_SRC/make_model.py" --tokenizer-only "$dir/tokenizer"
  "$ENGINE_TOOLS_VENV/bin/python" "$ENGINES_SRC/make_gguf.py" "$dir/tokenizer" "$dir/tiny.gguf"
}
gguf_key() {
  printf 'tiny.gguf\npython %s\n' "$(python_id "$PY")"
  cat "$TOOLS_LOCK" "$ENGINES_SRC/make_model.py" "$ENGINES_SRC/make_gguf.py"
  declare -f build_gguf
}

# build: sets BIN and GGUF, building what the cache does not have.
build() {
  ensure_tools
  cache_ensure llama-server "$(llama_key)" build_llama_server
  BIN=$CACHE_DIR/bin/llama-server
  cache_ensure gguf "$(gguf_key)" build_gguf
  GGUF=$CACHE_DIR/tiny.gguf
}

start() {
  local name=${1:-llamacpp} port=${2:-8023}
  shift $(($# < 2 ? $# : 2))
  cache_hit llama-server "$(cache_key "$(llama_key)")" ||
    die "llama-server is not built for these pins and this machine: run scripts/engines/llamacpp.sh build"
  build
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
  build | install) build ;;
  start) start "$@" ;;
  stop) stop_server "${1:-llamacpp}" ;;
  url) server_url "${1:-llamacpp}" ;;
  *)
    sed -n '2,17p' "$0" >&2
    exit 2
    ;;
esac
