#!/usr/bin/env bash
# Browser test of the speed test matrix page (the self-contained report.html a run writes).
#
# Renders the page of the reference result and of a simulated run, opens each
# from disk in headless Chromium with the network disabled, and fails when the
# page logs anything to the console, makes a request (all of which fail with
# the network off) or is refused by its CSP, or does not render its sections. Screenshots (light and
# dark) and a printed PDF land in target/browser/ for people to look at.
#
# Usage: scripts/browser-test.sh          (from anywhere in the repository)
#        SPEEDMATRIX_BIN=path/to/speedmatrix scripts/browser-test.sh
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source scripts/lib.sh
OUT=target/browser
mkdir -p "$OUT"
find_chromium

BIN="${SPEEDMATRIX_BIN:-target/debug/speedmatrix}"
if [ -z "${SPEEDMATRIX_BIN:-}" ]; then
    cargo build -q -p speedmatrix
fi

REFERENCE=tests/data/reference/ling-3.0-flash-int4-2xh200nvl.lil-bench-result.json
"$BIN" report "$REFERENCE" --html "$OUT/reference.html" --md "$OUT/reference.md" --csv "$OUT/reference.csv"

rm -rf "$OUT/sim-run"
# with a price and a capacity search, so the page shows every mark of the capacity answer
if ! "$BIN" run --contexts 8k,32k --concurrency 1,4 --duration 2s --ready-stable 1s --warmup 0s \
    --find-capacity --cost-per-hour 10 --out "$OUT/sim-run" >"$OUT/sim-run.log" 2>&1; then
    echo "browser-test: FAIL: the simulated run failed; see $OUT/sim-run.log" >&2
    tail -20 "$OUT/sim-run.log" >&2
    exit 1
fi
"$BIN" report "$OUT/sim-run" --html "$OUT/sim.html"

# Every request that leaves the machine fails: unknown hosts and a dead proxy.
NO_NETWORK=(--proxy-server=127.0.0.1:9 --host-resolver-rules="MAP * ~NOTFOUND , EXCLUDE localhost")

# Console output of the page (any level: a clean page logs nothing), CSP
# refusals and uncaught errors, from Chromium's log.
console_problems() {
    grep -E 'CONSOLE|Refused to|Uncaught|Content Security Policy' "$1" || true
}

# Requests the page itself made (the browser's own update and account
# checks have no page origin as initiator), from Chromium's NetLog. With the
# network disabled every one of them failed; a self-contained page makes none.
request_problems() {
    python3 - "$1" <<'PY'
import json, sys
try:
    events = json.load(open(sys.argv[1]))["events"]
except Exception as e:  # an unreadable log must not pass as "no requests"
    print(f"cannot read the NetLog {sys.argv[1]}: {e}")
    sys.exit(0)
urls = set()
for e in events:
    p = e.get("params")
    if isinstance(p, dict) and "url" in p and "initiator" in p and p["initiator"] != "not an origin":
        if not p["url"].startswith(("file:", "data:", "about:")):
            urls.add(p["url"])
for u in sorted(urls):
    print(f"request from the page: {u}")
PY
}

problems() {
    console_problems "$1"
    request_problems "$1.netlog.json"
}

# page_run LOG ARGS...: one headless Chromium (scripts/lib.sh), offline, with its NetLog beside LOG.
page_run() {
    local log="$1"
    shift
    chromium_run "$log" "${NO_NETWORK[@]}" --log-net-log="$log.netlog.json" "$@"
}

FAILED=0

# check_page NAME HTML [MARK…]: MARKs are the aria-labels of the matrix's marks the page must
# show (e.g. "meets the SLO", "capacity", "searched").
check_page() {
    local name="$1" html="$2"
    shift 2
    local url
    url="file://$(realpath "$html")"
    local log="$OUT/$name.chromium.log"

    page_run "$log" --dump-dom "$url"
    local dom="$log.out"
    for section in 'Capacity' 'Hardware' 'Engine' 'Launch command' 'Prefill' 'Sustained decode' \
        'Throughput per GPU against speed per user' 'All measurements' 'Methodology'; do
        if ! grep -q ">$section<" "$dom"; then
            echo "browser-test: FAIL: $name: section '$section' not rendered" >&2
            FAILED=1
        fi
    done
    if ! grep -q '<svg class="chart"' "$dom"; then
        echo "browser-test: FAIL: $name: no chart rendered" >&2
        FAILED=1
    fi
    # the capacity answer: its sentences, the SLO it used, and the SLO chart with its line
    # and the frontier chart
    for needle in '<section class="answer"' 'context: ' 'Service level (SLO): ' '>Per-user tok/s against the SLO<' '<line class="limit"' \
        '>Throughput against interactivity<'; do
        if ! grep -qF "$needle" "$dom"; then
            echo "browser-test: FAIL: $name: the capacity answer lacks '$needle'" >&2
            FAILED=1
        fi
    done

    # the matrix's marks, as a reader (or a screen reader) meets them in the DOM: the label and its glyph
    local mark glyph
    for mark in "$@"; do
        case "$mark" in
            "meets the SLO") glyph="✓" ;;
            capacity) glyph="★" ;;
            searched) glyph="s" ;;
            *) glyph="" ;;
        esac
        if ! grep -qF "aria-label=\"$mark\">$glyph</span>" "$dom"; then
            echo "browser-test: FAIL: $name: the matrix has no '$mark' mark ($glyph)" >&2
            FAILED=1
        fi
    done

    page_run "$log.light" --window-size=1280,2600 --screenshot="$OUT/$name.png" "$url"
    page_run "$log.dark" --force-dark-mode --blink-settings=preferredColorScheme=0 --window-size=1280,2600 \
        --screenshot="$OUT/$name-dark.png" "$url"
    page_run "$log.print" --print-to-pdf="$OUT/$name.pdf" --no-pdf-header-footer "$url"

    for l in "$log" "$log.light" "$log.dark" "$log.print"; do
        local found
        found="$(problems "$l")"
        if [ -n "$found" ]; then
            echo "browser-test: FAIL: $name: $found" >&2
            FAILED=1
        fi
    done
    for f in "$OUT/$name.png" "$OUT/$name-dark.png" "$OUT/$name.pdf"; do
        if [ ! -s "$f" ]; then
            echo "browser-test: FAIL: $name: $f was not written" >&2
            FAILED=1
        fi
    done
    echo "browser-test: $name: $OUT/$name.png, $OUT/$name-dark.png, $OUT/$name.pdf"
}

# The checker itself must catch a page that fetches and logs errors, or a
# silent Chromium (no logging) would pass every page.
CANARY="$OUT/canary.html"
cat >"$CANARY" <<'EOF'
<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">
<script>console.error("canary console error")</script></body></html>
EOF
page_run "$OUT/canary.chromium.log" --dump-dom "file://$(realpath "$CANARY")"
if ! console_problems "$OUT/canary.chromium.log" | grep -q 'canary console error'; then
    echo "browser-test: FAIL: the checker did not notice the canary page's console error" >&2
    exit 1
fi
if ! request_problems "$OUT/canary.chromium.log.netlog.json" | grep -q 'example.invalid'; then
    echo "browser-test: FAIL: the checker did not notice the canary page's request" >&2
    exit 1
fi

# the reference file is judged from its summaries (no search); the simulated run searched
check_page reference "$OUT/reference.html" "meets the SLO" capacity
check_page sim "$OUT/sim.html" "meets the SLO" capacity searched

if [ "$FAILED" -ne 0 ]; then
    exit 1
fi
echo "browser-test: ok"
