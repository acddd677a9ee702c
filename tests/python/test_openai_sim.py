"""The official `openai` client against `speedmatrix sim` (a client nobody here wrote)."""

import json
import os
import re
import signal
import subprocess
import urllib.request

import openai
import pytest

BIN = os.environ.get("SPEEDMATRIX_BIN", "target/debug/speedmatrix")
PROMPT = "Tell me about the speed of inference servers, please."


def start_sim(*extra):
    proc = subprocess.Popen(
        [BIN, "sim", "--profile", "tiny", "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    m = re.search(r"at (http://\S+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"sim did not start: {line!r} {proc.stderr.read()!r}")
    return proc, m.group(1)


def stop_sim(proc):
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


@pytest.fixture(scope="module")
def sim():
    proc, url = start_sim()
    yield url
    stop_sim(proc)


@pytest.fixture
def client(sim):
    return openai.OpenAI(base_url=sim + "/v1", api_key="unused")


def test_models(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]


def test_stream_chat_with_usage(client):
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    text, finish, usage, ids = "", None, None, set()
    for chunk in stream:
        ids.add(chunk.id)
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert len(ids) == 1
    assert finish == "length"
    assert usage.completion_tokens == 16
    assert usage.total_tokens == usage.prompt_tokens + 16
    assert text.strip()
    base = str(client.base_url).rstrip("/").removesuffix("/v1")
    req = urllib.request.Request(
        base + "/tokenize",
        data=json.dumps({"model": "tiny", "messages": [{"role": "user", "content": PROMPT}]}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert json.load(resp)["count"] == usage.prompt_tokens


def test_stream_chat_continuous_usage(client):
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    )
    seen = [c.usage.completion_tokens for c in stream if c.usage]
    assert seen[0] == 0  # the role chunk
    assert seen == sorted(seen)
    assert seen[-1] == 8


def test_stream_completions(client):
    stream = client.completions.create(
        model="tiny",
        prompt=PROMPT,
        max_tokens=10,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    pieces, usage = [], None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
        if chunk.usage:
            usage = chunk.usage
    assert len([p for p in pieces if p]) == 10
    assert usage.completion_tokens == 10
    assert usage.prompt_tokens_details.cached_tokens >= 0


def test_non_streaming(client):
    chat = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": PROMPT}], max_tokens=5, extra_body={"ignore_eos": True}
    )
    assert chat.choices[0].message.role == "assistant"
    assert chat.usage.completion_tokens == 5
    comp = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=4, extra_body={"ignore_eos": True})
    assert comp.usage.completion_tokens == 4
    assert comp.choices[0].finish_reason == "length"


def test_second_identical_prompt_is_cached(client):
    prompt = " ".join(f"w{i}x" for i in range(400))
    for _ in range(2):
        comp = client.completions.create(model="tiny", prompt=prompt, max_tokens=1)
    assert comp.usage.prompt_tokens_details.cached_tokens > 0


def test_errors(client):
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x", max_tokens=1)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="tiny", prompt="x", max_tokens=100000)
    with pytest.raises(openai.RateLimitError):
        client.completions.create(model="tiny", prompt="x", max_tokens=1, extra_headers={"x-sim-fault": "status=429"})


def test_api_key():
    proc, url = start_sim("--api-key", "sekret")
    try:
        bad = openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=url + "/v1", api_key="sekret")
        assert good.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        ).usage.completion_tokens == 2
    finally:
        stop_sim(proc)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--profile", "no-such-profile"], "seed-ling-3.0-flash-h200nvl-x2, tiny"),
        (["--flavor", "ollama"], "--flavor"),
        (["--fault", "explode"], "--fault"),
        (["--port", "http"], "--port"),
    ],
)
def test_bad_flags_exit_1_with_a_clear_message(args, needle):
    r = subprocess.run([BIN, "sim", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert needle in r.stderr


def test_bad_profile_file_names_the_key(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('name = "x"\nmodel = "m"\nmax_model_len = "long"\n')
    r = subprocess.run([BIN, "sim", "--profile", str(f)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "max_model_len" in r.stderr and "integer" in r.stderr


def test_trace_file_is_flushed_on_sigterm(tmp_path):
    trace = tmp_path / "trace.jsonl"
    proc, url = start_sim("--trace", str(trace))
    try:
        c = openai.OpenAI(base_url=url + "/v1", api_key="x")
        c.completions.create(model="tiny", prompt="hello", max_tokens=3, extra_body={"ignore_eos": True})
    finally:
        stop_sim(proc)
    rec = json.loads(trace.read_text().splitlines()[0])
    assert rec["completion_tokens"] == 3 and rec["finish"] == "length"
    assert len(rec["emissions"]) == 3
