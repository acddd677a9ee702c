#!/usr/bin/env bash
# Fuzzes speedmatrix's parsers with cargo-fuzz (libFuzzer + AddressSanitizer).
#
#   scripts/fuzz.sh all 60        every target for 60 s each
#   scripts/fuzz.sh sse 600       one target: sse | openai_chunk | chunk_fast | metrics | import
#   scripts/fuzz.sh list          the targets
#
# cargo-fuzz wants a nightly compiler; on a stable one RUSTC_BOOTSTRAP=1 unlocks the
# `-Z` flags it passes (sanitizer, coverage), so stable works. cargo-fuzz itself is
# installed into .work/cargo-bin if it is not on PATH. What libFuzzer finds goes to
# fuzz/work/TARGET (ignored); the committed seeds in fuzz/corpus/TARGET are only read.
# A crash stops the run, exits non-zero and leaves the input in fuzz/artifacts/TARGET/;
# replay it with `RUSTC_BOOTSTRAP=1 cargo fuzz run -a TARGET fuzz/artifacts/TARGET/crash-…`
# from fuzz/, and add it to corpus/TARGET/ with a regression test next to the parser.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib.sh
source scripts/lib.sh
ROOT=$PWD
TARGETS=(sse openai_chunk chunk_fast metrics import)
what=${1:-all}
seconds=${2:-60}
if [ "$what" = list ]; then
  printf '%s\n' "${TARGETS[@]}"
  exit 0
fi
# shellcheck disable=SC2076 # a literal match of " NAME " in the list, not a regex
if [ "$what" != all ] && [[ ! " ${TARGETS[*]} " =~ " $what " ]]; then
  echo "unknown fuzz target '$what': use one of ${TARGETS[*]}, all or list" >&2
  exit 2
fi
[[ $seconds =~ ^[0-9]+$ ]] || { echo "SECONDS must be a whole number, not '$seconds'" >&2; exit 2; }

export PATH=$ROOT/.work/cargo-bin/bin:$PATH
if ! cargo fuzz --version >/dev/null 2>&1; then
  step "installing cargo-fuzz into .work/cargo-bin (a few minutes, once)"
  cargo install cargo-fuzz --locked --root "$ROOT/.work/cargo-bin"
fi
export RUSTC_BOOTSTRAP=1

# Inputs a parser meets in practice are at most a few hundred KB (a lil-bench
# upload); the import target gets room for those, the others for a long stream
# or scrape. Memory is capped so a blow-up fails the run instead of the machine.
max_len() { case $1 in import) echo 262144 ;; *) echo 16384 ;; esac; }
# chunk_fast reads the same payloads as openai_chunk: it shares that target's seeds.
seeds() { case $1 in chunk_fast) echo corpus/openai_chunk ;; *) echo "corpus/$1" ;; esac; }

cd fuzz
cargo fuzz build -a
[ "$what" = all ] && run=("${TARGETS[@]}") || run=("$what")
for t in "${run[@]}"; do
  step "fuzz $t for ${seconds}s"
  mkdir -p "work/$t"
  log=work/$t.log
  if ! cargo fuzz run -a "$t" "work/$t" "$(seeds "$t")" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len="$(max_len "$t")" \
    -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz target $t failed: the input is in fuzz/artifacts/$t/, the log in fuzz/$log" >&2
    exit 1
  fi
  grep -E '^(Done |stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb))' "$log"
done
