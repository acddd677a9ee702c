#!/usr/bin/env bash
# Regenerates the seed corpus from the simulated engine and the reference files
# in tests/data/. Run from anywhere after `cargo build -p speedmatrix`; commit
# what it writes. The seeds are real bytes as the sim emits them, one file per
# stream or scrape, kept small (max_tokens 6) so the corpus stays a few hundred KB.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SPEEDMATRIX_BIN:-target/debug/speedmatrix}
C=fuzz/corpus
mkdir -p "$C"/{sse,openai_chunk,metrics,import}

sim_pid=
stop_sim() { if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; sim_pid=; fi; }
trap stop_sim EXIT

start_sim() { # flavor, extra args…
  local flavor=$1; shift
  local log; log=$(mktemp)
  "$BIN" sim --profile tiny --port 0 --flavor "$flavor" "$@" >"$log" 2>&1 &
  sim_pid=$!
  for _ in $(seq 100); do
    URL=$(grep -o 'http://[0-9.:]*' "$log" | head -1 || true)
    [ -n "$URL" ] && break
    sleep 0.1
  done
  [ -n "$URL" ] || { cat "$log"; exit 1; }
}

stream() { # name, path, body, [fault]
  local name=$1 path=$2 body=$3 fault=${4:-}
  local args=(-sN --max-time 10 -H 'content-type: application/json' -d "$body")
  [ -n "$fault" ] && args+=(-H "x-sim-fault: $fault")
  curl "${args[@]}" "$URL$path" >"$C/sse/$name" || true
}

chat='"messages":[{"role":"user","content":"Say something about the sea."}]'
for flavor in vllm sglang llamacpp tgi generic; do
  start_sim "$flavor"
  stream "$flavor-chat" /v1/chat/completions "{$chat,\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
  curl -s --max-time 5 "$URL/metrics" >"$C/metrics/$flavor-idle" || true
  if [ "$flavor" = vllm ]; then
    stream vllm-chat-continuous-usage /v1/chat/completions "{$chat,\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}"
    stream vllm-completions /v1/completions "{\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
    stream vllm-natural-stop /v1/chat/completions "{$chat,\"max_tokens\":64,\"stream\":true}"
    # a request with tools: one call of the first tool (the name's delta, then argument fragments)
    tools='"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]'
    stream vllm-tool-call /v1/chat/completions "{$chat,$tools,\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true,\"continuous_usage_stats\":true}}"
    for fault in multi-token=3 malformed-sse no-usage loop disconnect-after=3 status=429 status=503; do
      stream "vllm-fault-${fault/=/-}" /v1/chat/completions "{$chat,\"max_tokens\":6,\"ignore_eos\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" "$fault"
    done
    # a scrape while requests run, so gauges are non-zero
    curl -sN --max-time 10 -H 'content-type: application/json' \
      -d "{$chat,\"max_tokens\":200,\"ignore_eos\":true,\"stream\":true}" "$URL/v1/chat/completions" >/dev/null &
    load_pid=$!
    sleep 0.3
    curl -s --max-time 5 "$URL/metrics" >"$C/metrics/vllm-busy" || true
    wait "$load_pid" || true
  fi
  stop_sim
done

# every data: payload of the captured streams is an openai_chunk seed
python3 - "$C" <<'PY'
import hashlib, os, sys
c = sys.argv[1]
seen = set()
for name in sorted(os.listdir(f"{c}/sse")):
    data = open(f"{c}/sse/{name}", "rb").read()
    for i, line in enumerate(data.split(b"\n")):
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            continue
        # keep one of each shape: same keys with different text are the same seed to the fuzzer
        shape = hashlib.sha1(bytes(b for b in payload if not chr(b).isalnum())).hexdigest()
        if shape in seen:
            continue
        seen.add(shape)
        open(f"{c}/openai_chunk/{name}-{i}", "wb").write(payload)
PY

# the reference tool's files, and a run.json; the 120 KB bench file is cut to
# its first results so the corpus stays small (a fuzzer mutates small seeds better)
cp tests/data/run-sample.json "$C/import/run-sample.json"
cp tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json "$C/import/lil-bench-result.json"
python3 - tests/data/reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json "$C/import/llm-inference-bench-0.4.18.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["results"] = doc.get("results", [])[:3]
json.dump(doc, open(sys.argv[2], "w"), separators=(",", ":"))
PY
echo "seed corpus: $(find "$C" -type f | wc -l) files, $(du -sh "$C" | cut -f1)"
