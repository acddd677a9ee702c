#!/usr/bin/env python3
"""The replay sender under load (issue 32, docs/performance.md): a Mooncake trace sent open loop at
RATE requests/s against the simulated engine, the client pinned to one core (one worker thread),
the sim to another. Reports the send lag (from each request's due time to its send) as the run
recorded it, the late sends, the achieved rate, and the client's peak RSS, at each trace size.

  bench/replay/run.sh                      # 10,000 and 100,000 requests at 1,000 req/s
  REQUESTS=20000 RATE=2000 bench/replay/run.sh

Python 3.11 standard library only.
"""

import argparse
import json
import os
import random
import re
import resource
import subprocess
import sys
import time


def make_trace(path, requests, rate, seed=7):
    """Requests RATE/s apart (Poisson), prompts of 2-8 blocks of 64 tokens; half begin with one of
    50 shared documents of 2 blocks, so the prefix cache has something to find."""
    rng = random.Random(seed)
    t = 0.0
    with open(path, "w") as f:
        for i in range(requests):
            t += rng.expovariate(rate)
            blocks = rng.randint(2, 8)
            ids = []
            if rng.random() < 0.5:
                doc = rng.randrange(50)
                ids = [doc * 2, doc * 2 + 1]
            ids += [1000 + i * 8 + j for j in range(blocks - len(ids))]
            line = {"timestamp": int(t * 1000), "input_length": blocks * 64 - rng.randrange(32),
                    "output_length": 4, "hash_ids": ids}
            f.write(json.dumps(line) + "\n")


def start_sim(binary, profile, cpus, log):
    p = subprocess.Popen(["taskset", "-c", cpus, binary, "sim", "--profile", profile, "--port", "0"],
                         stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    m = re.search(r"at (http://\S+)", p.stdout.readline())
    if not m:
        raise RuntimeError("the sim did not start; see " + log)
    return p, m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--requests", default="10000,100000")
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--client-cpus", default="0")
    ap.add_argument("--sim-cpus", default="1")
    a = ap.parse_args()
    profile = os.path.join(os.path.dirname(__file__), "..", "fidelity", "fidelity.toml")
    rows = []
    for n in [int(x) for x in a.requests.split(",")]:
        trace = os.path.join(a.out, f"trace-{n}.jsonl")
        make_trace(trace, n, a.rate)
        sim, url = start_sim(a.bin, profile, a.sim_cpus, os.path.join(a.out, f"sim-{n}.log"))
        out = os.path.join(a.out, f"run-{n}")
        cmd = ["taskset", "-c", a.client_cpus, a.bin, "run", "--url", url, "--replay", trace,
               "--replay-block-tokens", "64", "--client-threads", "1", "--progress", "plain",
               "--ready-stable", "300ms", "--warmup", "0s", "--out", out]
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.monotonic()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - t0
        rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        sim.terminate()
        sim.wait(30)
        if r.returncode != 0:
            sys.exit(f"run failed ({r.returncode}):\n{r.stdout[-3000:]}")
        level = json.load(open(os.path.join(out, "run.json")))["phases"]["replay"]["levels"][0]
        lag = level["send_lag_ms"]
        c = level["counts"]
        rows.append({
            "requests": n, "rate": a.rate, "achieved_rps": level["achieved_rps"],
            "completed": c["completed"], "late": c["late"], "lag_p50_ms": lag["p50"], "lag_p99_ms": lag["p99"],
            "lag_max_ms": lag["max"], "peak_rss_mib": (rss_kib if rss_kib > before else before) / 1024,
            "wall_s": wall, "cached_pct_of_ideal": level["prefix"].get("reached_pct"),
        })
        print(json.dumps(rows[-1]), flush=True)
    json.dump(rows, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    print("| requests | offered req/s | achieved req/s | completed | late (>10 ms) | send lag p50 / p99 / max ms | client peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['requests']:,} | {r['rate']:,.0f} | {r['achieved_rps']:,.1f} | {r['completed']:,} | {r['late']:,} | "
              f"{r['lag_p50_ms']:.3f} / {r['lag_p99_ms']:.3f} / {r['lag_max_ms']:.1f} | {r['peak_rss_mib']:.0f} |")


if __name__ == "__main__":
    main()
