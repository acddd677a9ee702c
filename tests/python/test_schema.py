"""Every run.json speedmatrix writes validates against the published schema/run.schema.json."""

import json
import os
import pathlib
import re
import subprocess

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("SPEEDMATRIX_BIN", str(ROOT / "target" / "debug" / "speedmatrix"))
SCHEMA = json.loads((ROOT / "schema" / "run.schema.json").read_text())
REQUEST_SCHEMA = json.loads((ROOT / "schema" / "request.schema.json").read_text())


def validate(record):
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(record)


def test_sample_record_validates():
    validate(json.loads((ROOT / "tests" / "data" / "run-sample.json").read_text()))


def test_a_ranked_cell_validates():
    # `--ranks N` (1.4): a cell lists each process's share; the Rust test runs it for real
    record = json.loads((ROOT / "tests" / "data" / "run-sample.json").read_text())
    cell = next(c for c in record["decode"] if c["status"] == "valid")
    cell["ranks"] = [
        {"rank": 0, "streams": 2, "output_tokens": 10, "requests": 2, "client_lag_ms_p99": 0.2, "client_cpu_pct": 3.0},
        {"rank": 1, "streams": 1, "output_tokens": 5, "requests": 1, "open_rtt_ms": 0.3},
    ]
    validate(record)
    cell["ranks"][1]["host"] = "b"
    try:
        validate(record)
    except jsonschema.ValidationError:
        return
    raise AssertionError("an unknown field of a rank is refused")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_run_over_three_ranks_validates(tmp_path):
    # `--ranks 3` for real: three local processes against the sim, a cell, a rate level and a burst, each
    # listing every rank's part (docs/distributed.md)
    import socket
    import time
    sim_port, coordinator = free_port(), f"127.0.0.1:{free_port()}"
    sim = subprocess.Popen([BIN, "sim", "--profile", "tiny", "--port", str(sim_port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", sim_port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline, "the sim did not listen within 30 s"
                time.sleep(0.1)
        args = ["--url", f"http://127.0.0.1:{sim_port}", "--contexts", "1k", "--concurrency", "3",
                "--duration", "1s", "--max-tokens", "64", "--ready-stable", "200ms", "--warmup", "0s",
                "--matrix", "--request-rate", "20", "--requests", "6", "--burst", "--ranks", "3", "--coordinator", coordinator,
                "--rank-wait", "60s"]
        out = tmp_path / "ranked"
        workers = [subprocess.Popen([BIN, "run", *args, "--rank", str(r)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for r in (1, 2)]
        rank0 = subprocess.run([BIN, "run", *args, "--rank", "0", "--out", str(out)], capture_output=True,
                               text=True, timeout=300)
        for w in workers:
            _, err = w.communicate(timeout=60)
            assert w.returncode == 0, err
    finally:
        sim.kill()
        sim.wait()
    assert rank0.returncode == 0, rank0.stderr
    record = json.loads((out / "run.json").read_text())
    validate(record)
    cell = next(c for c in record["decode"] if c["status"] == "valid")
    assert [r["streams"] for r in cell["ranks"]] == [1, 1, 1], cell
    level = record["phases"]["rate"]["levels"][0]
    assert [(r["rank"], r["scheduled"]) for r in level["ranks"]] == [(0, 2), (1, 2), (2, 2)], level
    burst = record["phases"]["burst"]["bursts"][0]
    assert [(r["rank"], r["scheduled"]) for r in burst["ranks"]] == [(0, 1), (1, 1), (2, 1)], burst


def test_a_fresh_run_validates(tmp_path):
    out = tmp_path / "run"
    # no --url: the built-in simulated engine, here with the fast "tiny" profile
    proc = subprocess.run(
        [BIN, "run", "--sim-profile", "tiny", "--contexts", "1k,4k", "--concurrency", "1,2,128",
         "--duration", "1s", "--max-tokens", "256", "--ready-stable", "200ms", "--warmup", "1s",
         # the capacity answer's fields too: a search (to max_num_seqs 4) and prices
         "--max-num-seqs", "4", "--find-capacity", "--cost-per-hour", "12.5",
         # and precision's: adaptive windows and repeats (intervals, phases, repeats[])
         "--precision", "20%", "--min-duration", "1s", "--repeats", "2",
         # and one line per request in requests.jsonl
         "--save-requests", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "run.json").read_text())
    validate(record)
    valid = [c for c in record["decode"] if c["status"] == "valid"]
    assert all("ci" in c and "phases" in c and "precision_met" in c for c in valid), valid
    assert any(len(c.get("repeats", [])) == 2 for c in valid), valid
    # the sim has /metrics: every valid cell carries the server's series (methodology §14.1)
    assert all(len(c["server_metrics"]["series"]) >= 2 for c in valid), valid
    statuses = {c["status"] for c in record["decode"]}
    assert statuses == {"valid", "over_capacity"}, statuses
    assert any(c.get("searched") for c in record["decode"]), "the search measured C=4"
    assert {c["bounded_by"] for c in record["capacity"]} == {"max_num_seqs"}, record["capacity"]
    assert record["settings"]["save_requests"] is True
    lines = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    line_validator = jsonschema.Draft202012Validator(REQUEST_SCHEMA)
    for line in lines:
        line_validator.validate(line)
    assert {l["phase"] for l in lines} == {"decode", "warmup", "prefill"}, {l["phase"] for l in lines}
    assert {l.get("repeat") for l in lines if l["phase"] == "decode" and not l.get("searched")} == {1, 2}
    assert any(l.get("searched") for l in lines), "the search's lines are marked"


def test_a_dry_run_validates(tmp_path):
    out = tmp_path / "plan"
    proc = subprocess.run([BIN, "run", "--dry-run", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "planned"
    validate(record)


def test_a_broken_record_is_rejected():
    record = json.loads((ROOT / "tests" / "data" / "run-sample.json").read_text())
    record["decode"][0]["total_tps"] = record["decode"][0].pop("total_tok_s")
    try:
        validate(record)
    except jsonschema.ValidationError:
        return
    raise AssertionError("a renamed field must fail validation")


def test_a_sessions_run_validates(tmp_path):
    out = tmp_path / "sessions"
    proc = subprocess.run(
        [BIN, "run", "--sim-profile", "tiny", "--contexts", "1k", "--concurrency", "1", "--max-tokens", "16",
         "--ready-stable", "200ms", "--warmup", "0s", "--sessions", "2", "--turns", "2", "--think-time", "100ms",
         "--turn-tokens", "32", "--shared-prefix", "256", "--save-requests", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "run.json").read_text())
    validate(record)
    sessions = record["phases"]["sessions"]
    assert [s["status"] for s in sessions["sessions"]] == ["complete", "complete"], sessions
    line_validator = jsonschema.Draft202012Validator(REQUEST_SCHEMA)
    lines = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    for line in lines:
        line_validator.validate(line)
    assert sum(l["phase"] == "sessions" for l in lines) == 4


def test_a_replay_run_validates(tmp_path):
    out = tmp_path / "replay"
    # a Mooncake trace replayed at two scales with the capacity search, and its requests' lines
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": i * 100, "input_length": 100 + i, "output_length": 4, "hash_ids": [1, 10 + i]}) + "\n"
        for i in range(6)
    ))
    proc = subprocess.run(
        [BIN, "run", "--sim-profile", "tiny", "--replay", str(trace), "--replay-block-tokens", "64",
         "--time-scale", "8", "--find-capacity", "--slo", "ttft_p90<=60s", "--ready-stable", "200ms", "--warmup", "0s",
         "--save-requests", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "run.json").read_text())
    validate(record)
    replay = record["phases"]["replay"]
    assert replay["levels"] and replay["capacity"] is not None, replay
    line_validator = jsonschema.Draft202012Validator(REQUEST_SCHEMA)
    lines = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    for line in lines:
        line_validator.validate(line)
    assert sum(l["phase"] == "replay" for l in lines) == 6 * len(replay["levels"])


def test_a_prompts_file_runs_lines_validate(tmp_path):
    out = tmp_path / "prompts"
    # with --prompts a rate level and a burst have no context of their own: their lines say 0
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "say hi"}\n{"messages": [{"role": "user", "content": "and bye"}], "max_tokens": 8}\n')
    proc = subprocess.run(
        [BIN, "run", "--sim-profile", "tiny", "--prompts", str(prompts), "--request-rate", "20", "--requests", "4",
         "--burst", "--concurrency", "2", "--max-tokens", "16", "--ready-stable", "200ms", "--save-requests",
         "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    validate(json.loads((out / "run.json").read_text()))
    line_validator = jsonschema.Draft202012Validator(REQUEST_SCHEMA)
    lines = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    assert {l["phase"] for l in lines} == {"rate", "burst"}, lines
    for line in lines:
        line_validator.validate(line)


def test_a_burst_run_validates(tmp_path):
    out = tmp_path / "burst"
    # bursts alone, rounds and natural ends, an over-capacity cell, and their requests' lines
    proc = subprocess.run(
        [BIN, "run", "--sim-profile", "tiny", "--burst", "--burst-rounds", "2", "--no-ignore-eos",
         "--contexts", "1k,4k", "--concurrency", "1,8", "--kv-budget", "20k", "--max-tokens", "64",
         "--save-requests", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "run.json").read_text())
    validate(record)
    bursts = record["phases"]["burst"]["bursts"]
    assert {b["status"] for b in bursts} == {"valid", "over_capacity"}, bursts
    line_validator = jsonschema.Draft202012Validator(REQUEST_SCHEMA)
    for line in (out / "requests.jsonl").read_text().splitlines():
        line_validator.validate(json.loads(line))


def test_a_gpu_telemetry_run_validates(tmp_path):
    # the simulated engine's [gpu] serves a DCGM exporter's text: every decode cell gets `gpu`
    profile = tmp_path / "gpu.toml"
    tiny = (ROOT / "crates" / "sm-sim" / "profiles" / "tiny.toml").read_text()
    profile.write_text(tiny + "\n[gpu]\nidle_w = 100\nper_sequence_w = 60\ntdp_w = 250\n")
    sim = subprocess.Popen([BIN, "sim", "--profile", str(profile), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = None
        for line in sim.stdout:
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            if found:
                url = found.group(0)
                break
        assert url, "the sim printed its URL"
        out = tmp_path / "gpu"
        proc = subprocess.run(
            [BIN, "run", "--url", url, "--contexts", "1k", "--concurrency", "1,4", "--duration", "2s",
             "--max-tokens", "4000", "--ready-stable", "200ms", "--warmup", "0s", "--no-prefill-at-max",
             "--gpu-metrics", url + "/dcgm/metrics", "--out", str(out)],
            capture_output=True, text=True, timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        record = json.loads((out / "run.json").read_text())
        validate(record)
        assert all(c["gpu"]["source"] == "dcgm" for c in record["decode"]), record["decode"]
        assert {c["gpu"]["throttle"] for c in record["decode"]} == {"none", "power"}
    finally:
        sim.terminate()
        sim.wait(timeout=30)


def test_every_golden_record_validates():
    # the records the golden tests pin, imported reference-tool files among them (whose context 0,
    # a row without a prompt prefix, has a capacity answer too)
    golden = sorted((ROOT / "tests" / "data" / "golden").rglob("*run.json"))
    assert len(golden) >= 3, golden
    for path in golden:
        try:
            validate(json.loads(path.read_text()))
        except jsonschema.ValidationError as e:
            raise AssertionError(f"{path.relative_to(ROOT)}: {e.message} at {list(e.absolute_path)}") from e
