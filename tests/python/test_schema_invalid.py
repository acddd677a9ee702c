"""schema/run.schema.json refuses every record in tests/data/schema-invalid/: each is a valid run with
one small change (a bound, a pattern, a closed object, a type, a required field) that the schema exists
to catch. The valid bases themselves validate."""

import json
import pathlib

import jsonschema
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schema" / "run.schema.json").read_text())
INVALID = ROOT / "tests" / "data" / "schema-invalid"
INDEX = json.loads((INVALID / "index.json").read_text())


def validator():
    return jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def test_every_fixture_is_indexed():
    files = {p.name for p in INVALID.glob("*.json")} - {"index.json"}
    assert files == set(INDEX), files ^ set(INDEX)
    assert len(files) >= 30


@pytest.mark.parametrize("name", sorted(INDEX))
def test_an_invalid_record_is_refused(name):
    record = json.loads((INVALID / name).read_text())
    errors = list(validator().iter_errors(record))
    assert errors, f"{name} ({INDEX[name]}) was accepted"


@pytest.mark.parametrize("base", ["golden/every-phase.run.json", "run-capacity-1.1.json", "run-sample.json"])
def test_the_bases_validate(base):
    validator().validate(json.loads((ROOT / "tests" / "data" / base).read_text()))
