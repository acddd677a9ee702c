#!/usr/bin/env python3
"""One table over bench/scaling/run.sh's fidelity runs: NAME=path/to/results.json arguments.
Python 3 standard library only."""
import json
import sys


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def main(args):
    print("| split | client CPUs / threads | sim CPUs | streams | tok/s truth | tok/s err % | TTFT p50 err net ms "
          "| TBT p50 err % | TBT p99 err % | client CPU µs/token | client lag p99 ms | client CPU % | peak RSS MiB | load |")
    print("|" + "---|" * 14)
    for arg in args:
        name, path = arg.split("=", 1)
        for r in json.load(open(path))["rows"]:
            e, t = r.get("err") or {}, r.get("truth") or {}
            print(f"| {name} | {r.get('client_cpus')} / {r.get('client_threads', '?')} | {r.get('sim_cpus')} "
                  f"| {r['streams']:,} | {fmt(t.get('tok_s'), ',.0f')} | {fmt(e.get('tok_s_pct'), '+.2f')} "
                  f"| {fmt(e.get('ttft_p50_ms_net'), '+.1f')} | {fmt(e.get('tbt_p50_pct'), '+.2f')} "
                  f"| {fmt(e.get('tbt_p99_pct'), '+.1f')} | {fmt(r.get('cpu_us_per_token_window'), '.2f')} "
                  f"| {fmt(r.get('client_lag_ms_p99'), '.1f')} | {fmt(r.get('client_cpu_pct'), '.0f')} "
                  f"| {fmt(r.get('peak_rss_mib'), '.0f')} | {r.get('load1')} |")


if __name__ == "__main__":
    main(sys.argv[1:])
