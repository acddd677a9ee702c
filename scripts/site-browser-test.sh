#!/usr/bin/env bash
# Browser test of the results site (`speedmatrix serve`, where people upload and compare runs).
#
# Starts `speedmatrix serve` on a fresh SQLite file, uploads three runs with
# `speedmatrix upload`, then, in headless Chromium with the network disabled,
# opens the runs list, a filtered list, the list at one context (sorted by the
# capacity there), a run, a comparison (with the capacity answers side by side) and
# the upload form; then, driving the pages as a person would (scripts/site-browser-test.py),
# filters the list through its form, ticks two runs and presses "Compare
# selected", and uploads a file through the upload form.
# Fails when a page is missing what it should show, logs to the console, is
# refused by its CSP or makes a request that leaves the machine. Screenshots
# land in target/site-browser/.
#
# Usage: scripts/site-browser-test.sh
#        SPEEDMATRIX_BIN=path/to/speedmatrix scripts/site-browser-test.sh
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source scripts/lib.sh
OUT=target/site-browser
rm -rf "$OUT"
mkdir -p "$OUT"
find_chromium

BIN="${SPEEDMATRIX_BIN:-target/debug/speedmatrix}"
if [ -z "${SPEEDMATRIX_BIN:-}" ]; then
    cargo build -q -p speedmatrix
fi

DB="sqlite://$PWD/$OUT/site.db"
TOKEN=$("$BIN" serve token create --name browser-test --db "$DB" 2>/dev/null)

SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
"$BIN" serve --db "$DB" --listen 127.0.0.1:0 >"$OUT/serve.out" 2>"$OUT/serve.log" &
SERVER_PID=$!
SITE=""
for _ in $(seq 1 100); do
    SITE=$(grep -o 'http://[0-9.:]*' "$OUT/serve.out" 2>/dev/null || true)
    [ -n "$SITE" ] && break
    sleep 0.1
done
if [ -z "$SITE" ]; then
    echo "site-browser-test: FAIL: speedmatrix serve did not start; see $OUT/serve.log" >&2
    exit 1
fi

upload() { SPEEDMATRIX_TOKEN="$TOKEN" "$BIN" upload "$1" --site "$SITE" | sed 's#.*/runs/##'; }
SAMPLE=$(upload tests/data/run-sample.json)
LIL=$(upload tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json)
TINY=$(upload tests/data/reference/llm-inference-bench-0.4.18.vllm-cpu-tiny.json)
# a speedmatrix.run/1.1 run with its own SLO and price (the others get the default SLO at upload)
CAP=$(upload tests/data/run-capacity-1.1.json)
# A made-up variant of the sample, faster at 8K and slower at 128K, so the
# comparison's ratio colours show in the screenshots.
python3 - tests/data/run-sample.json "$OUT/variant.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["label"] = "synthetic variant of the sample (browser test)"
for cell in run["decode"]:
    factor = {8192: 1.35, 131072: 0.7}.get(cell["context"], 1.0) * (1 + cell["concurrency"] / 1000)
    for key in ("total_tok_s", "per_request_tok_s"):
        if cell.get(key) is not None:
            cell[key] *= factor
json.dump(run, open(sys.argv[2], "w"))
PY
VARIANT=$(upload "$OUT/variant.json")

# Every request that leaves the machine fails (unknown hosts, a dead proxy); the site is on 127.0.0.1.
NO_NETWORK=(--proxy-server=127.0.0.1:9 --host-resolver-rules="MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1")

FAILED=0
fail() {
    echo "site-browser-test: FAIL: $*" >&2
    FAILED=1
}

# page_run LOG ARGS...: one headless Chromium (scripts/lib.sh), offline but for the site.
page_run() {
    local log="$1"
    shift
    chromium_run "$log" "${NO_NETWORK[@]}" "$@"
}

# check NAME PATH NEEDLE... : the page's DOM holds every needle; screenshots light and dark.
check() {
    local name="$1" path="$2"
    shift 2
    local log="$OUT/$name.chromium.log"
    page_run "$log" --dump-dom "$SITE$path"
    for needle in "$@"; do
        if [[ "$needle" == '!'* ]]; then
            if grep -qF -- "${needle:1}" "$log.out"; then fail "$name ($path): shows '${needle:1}'"; fi
        elif ! grep -qF -- "$needle" "$log.out"; then
            fail "$name ($path): '$needle' not rendered"
        fi
    done
    page_run "$log.light" --window-size=1280,"${HEIGHT:-2200}" --screenshot="$OUT/$name.png" "$SITE$path"
    page_run "$log.dark" --force-dark-mode --blink-settings=preferredColorScheme=0 --window-size=1280,"${HEIGHT:-2200}" \
        --screenshot="$OUT/$name-dark.png" "$SITE$path"
    for l in "$log" "$log.light" "$log.dark"; do
        local found
        found=$(grep -E 'CONSOLE|Refused to|Uncaught|Content Security Policy|ERR_PROXY|ERR_NAME_NOT_RESOLVED' "$l" || true)
        [ -z "$found" ] || fail "$name: $found"
    done
    for f in "$OUT/$name.png" "$OUT/$name-dark.png"; do
        [ -s "$f" ] || fail "$name: $f was not written"
    done
    echo "site-browser-test: $name: $OUT/$name.png"
}

check runs "/" "/runs/$SAMPLE" "/runs/$LIL" "/runs/$TINY" "/runs/$VARIANT" "/runs/$CAP" "Compare selected" \
    "Capacity (users)" "1K: 4" ">KV</abbr>" "tok_s_p10&gt;=400" "tok_s_p10&gt;=20,ttft_p90&lt;=2s"
check runs-context "/?context=8K" "Users at 8K ↓" "/runs/$CAP" "/runs/$SAMPLE" "8K: 4" "!1K: 4" "!128K: "
check runs-filtered "/?gpu=H200&from=2026-09-01&to=2026-09-30&sort=peak&dir=desc" "/runs/$SAMPLE" "/runs/$LIL" \
    "/runs/$VARIANT" "!/runs/$TINY" "1–3 of 3"
check run "/runs/$SAMPLE" "Sustained decode" "by @browser-test" "/runs/$SAMPLE/run.json" "/runs/$SAMPLE/measurements.csv" \
    "/runs/$SAMPLE/report.md" '<svg class="chart"'
HEIGHT=4800 check compare "/compare?ids=$SAMPLE,$VARIANT,$LIL,$TINY" "Comparing 4 runs" "1.35×" "Settings and provenance" "1.00×" \
    "Total tok/s at 8K context" "Prompt tok/s by context"
check compare-capacity "/compare?ids=$CAP,$SAMPLE,$TINY" 'id="capacity"' "used different SLOs" "not comparable" \
    "\$2.50 per user-hour" "not measured" "judged after the fact" "KV cache holds no more distinct users"
check upload-form "/upload" 'enctype="multipart/form-data"' 'type="file"'

# Filter through the form, tick two runs, press "Compare selected".
CMP=$(CHROMIUM_LOG="$OUT/form-compare.chromium.log" timeout 120 python3 scripts/site-browser-test.py filter-compare \
    "$SITE" H200 2026-09-01 2026-09-30 "$SAMPLE,$LIL,$VARIANT" "$TINY" "$OUT/form-compare.png" "${NO_NETWORK[@]}") \
    || fail "filtering and comparing through the forms failed"
[ -z "${CMP:-}" ] || echo "site-browser-test: filter form and compare checkboxes: $CMP, $OUT/form-compare.png"

# Upload through the form, as a person would: a run the site does not have yet (the sample is
# there already, and an upload of the same run is stored once).
python3 - tests/data/run-sample.json "$OUT/form-upload.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
run["label"] = "uploaded through the form (browser test)"
json.dump(run, open(sys.argv[2], "w"))
PY
WHERE=$(CHROMIUM_LOG="$OUT/form-upload.chromium.log" timeout 120 python3 scripts/site-browser-test.py upload \
    "$SITE" "$TOKEN" "$OUT/form-upload.json" "$OUT/form-upload.png" "${NO_NETWORK[@]}") \
    || fail "uploading through the form failed"
if [ -n "${WHERE:-}" ]; then
    check uploaded "$WHERE" "Sustained decode" "by @browser-test"
    COUNT=$(grep -o '"total":[0-9]*' <(curl -s --max-time 10 "$SITE/api/runs") | cut -d: -f2 || true)
    [ "${COUNT:-0}" = 6 ] || fail "expected 6 runs after the form upload, the API says ${COUNT:-nothing}"
    echo "site-browser-test: form upload: $WHERE, $OUT/form-upload.png"
fi

if [ "$FAILED" -ne 0 ]; then
    exit 1
fi
echo "site-browser-test: ok"
