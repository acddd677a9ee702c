"""A run with the rate phase (--request-rate) validates against schema/run.schema.json, and its
requests.jsonl lines against schema/request.schema.json: measured, saturated and skipped levels."""

import json
import os
import pathlib
import subprocess

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("SPEEDMATRIX_BIN", str(ROOT / "target" / "debug" / "speedmatrix"))
SCHEMA = json.loads((ROOT / "schema" / "run.schema.json").read_text())
REQUEST_SCHEMA = json.loads((ROOT / "schema" / "request.schema.json").read_text())


def test_a_rate_run_validates(tmp_path):
    out = tmp_path / "run"
    # one request at a time against 100+ req/s: both levels saturate and the third is skipped
    proc = subprocess.run(
        [BIN, "run", "--sim-profile", "tiny", "--contexts", "1k", "--request-rate", "100,200,400",
         "--requests", "8", "--max-concurrency", "1", "--arrival", "gamma:2", "--max-tokens", "16",
         "--save-requests", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "run.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(record)
    levels = record["phases"]["rate"]["levels"]
    assert [l["status"] for l in levels] == ["measured", "measured", "skipped"], levels
    assert record["phases"]["rate"]["settings"]["arrival"] == "gamma:2"
    validator = jsonschema.Draft202012Validator(REQUEST_SCHEMA)
    lines = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    for line in lines:
        validator.validate(line)
    assert len([l for l in lines if l["phase"] == "rate"]) == 16
