#!/usr/bin/env python3
"""Checks that `speedmatrix sim --write-tokenizer DIR` counts exactly like the sim: for sample texts,
random texts and texts decoded from random vocabulary ids (what `vllm bench serve --dataset-name
random` sends), the `tokenizers` package's count must equal the sim's /tokenize count.

    PY=.work/peers/guidellm/bin/python   # any Python with the `tokenizers` package
    $PY bench/fidelity/check_tokenizer.py target/release/speedmatrix
"""
import json
import random
import re
import subprocess
import sys
import tempfile
import urllib.request

from tokenizers import Tokenizer

SAMPLES = [
    "hello world", " ", "  leading and  double  spaces ", "a,  b!\n", "naïve café — ok 日本語 😀",
    "x12345678 y 0.5e-3 foo_bar-baz", "The quick brown fox jumps over the lazy dog.\n\nNew paragraph\ttab",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
    "<|im_start|>user\nhi<|im_end|>", "ALLCAPS lowercase MiXeD 1234567890 abc123def",
]


def main():
    binary = sys.argv[1]
    rng = random.Random(1)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"-\n\téü€😀"
    texts = list(SAMPLES)
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400))) for _ in range(300)]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([binary, "sim", "--profile", "tiny", "--write-tokenizer", d], check=True,
                       stdout=subprocess.DEVNULL)
        tok = Tokenizer.from_file(f"{d}/tokenizer.json")
        vocab = tok.get_vocab_size()
        texts += [tok.decode([rng.randrange(vocab) for _ in range(rng.randint(1, 1024))]) for _ in range(100)]
        sim = subprocess.Popen([binary, "sim", "--profile", "tiny", "--port", "0"], stdout=subprocess.PIPE, text=True)
        try:
            url = re.search(r"at (http://\S+)", sim.stdout.readline()).group(1)
            bad = 0
            for t in texts:
                req = urllib.request.Request(f"{url}/tokenize", json.dumps({"prompt": t}).encode(),
                                             {"Content-Type": "application/json"})
                want = json.load(urllib.request.urlopen(req))["count"]
                got = len(tok.encode(t, add_special_tokens=False).ids)
                if got != want:
                    bad += 1
                    print(f"MISMATCH sim {want} hf {got}: {t[:80]!r}")
        finally:
            sim.terminate()
            sim.wait()
    print(f"{len(texts)} texts, {bad} mismatches (vocabulary {vocab})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
