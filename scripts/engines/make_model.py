#!/usr/bin/env python3
"""Make a tiny Llama that vLLM can serve: a byte-level BPE tokenizer and random weights.

    make_model.py DIR                   3.3 M parameters (hidden 256, 2 layers), ~6.6 MB
    make_model.py --small100m DIR       98.6 M parameters (hidden 1024, 8 layers), ~190 MB
    make_model.py --tokenizer-only DIR  the tokenizer files only (needs `tokenizers`, not torch)

The tokenizer is trained on text generated here from a fixed seed, so the same package versions give
byte-identical files on every machine; reading the interpreter's own files would not. The weights are
random: the model emits noise, which is all a speed test needs (requests set ignore_eos and max_tokens).
"""

import argparse
import hashlib
import json
import os
import sys

VOCAB_SIZE = 4096
# sha256 of the tokenizer.json that tokenizers==0.23.3 (the pin of both locks) trains here. The
# real-engine tests compare prompt lengths across vLLM and llama.cpp, so both must get this file.
TOKENIZER_SHA256 = "2106b7fb3aedb2860701ff99b2c6f32dce0614dfc350b44ac399b7424af0a387"
SEED = 20261202
BOS, EOS, PAD = "<|bos|>", "<|endoftext|>", "<|pad|>"
SPECIAL = [PAD, BOS, EOS, "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

WORDS = """the of and to in is that for it as with was on be by this are at from or an have not which
but all they one were there been has their more when will would can if so what about out up into them
than some could other time only new these two may first then do any like my now over such our man me
even most made after also did many before must through back years where much your way well down
should because each just those people how too little state good very make world still own see men
work long get here between both life being under never day same another know while last might us
great old year off come since against go came right used take three speed token server request
stream cache prefill decode latency throughput context window model matrix queue batch memory block
engine metric cell load budget window prompt reply answer question value number table record test""".split()
CODE = """def return import class self None True False for while if else elif try except with lambda yield
async await print len range dict list str int float open json path value key items append format
fn let mut pub struct impl enum match use crate mod where async move Some Ok Err Vec String u64 f64""".split()
PUNCT = [". ", ", ", "; ", ": ", "? ", "! ", " - ", " (", ") ", '"', "'", "\n", "\n\n"]


class Lcg:
    """A 64-bit LCG: the text must not depend on Python's `random`, whose algorithms may change."""

    def __init__(self, seed):
        self.x = seed

    def below(self, n):
        self.x = (self.x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.x >> 33) % n


def pseudo_word(rng):
    cons, vows = "bcdfghjklmnprstvwz", "aeiou"
    return "".join(cons[rng.below(len(cons))] + vows[rng.below(len(vows))] for _ in range(1 + rng.below(3)))


def corpus(n_docs=3000):
    """Deterministic prose, code-like lines and numbers, about 2 MB in all."""
    rng = Lcg(SEED)
    for _ in range(n_docs):
        parts = []
        for _ in range(60 + rng.below(120)):
            r = rng.below(100)
            if r < 62:
                w = WORDS[rng.below(len(WORDS))]
                parts.append(w.capitalize() if rng.below(12) == 0 else w)
            elif r < 74:
                parts.append(CODE[rng.below(len(CODE))])
            elif r < 84:
                parts.append(pseudo_word(rng))
            elif r < 90:
                parts.append(str(rng.below(100000)))
            else:
                parts.append(PUNCT[rng.below(len(PUNCT))].strip(" ") or "\n")
        yield " ".join(parts)


def make_tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]),
        ]
    )
    os.makedirs(out, exist_ok=True)
    tok.save(os.path.join(out, "tokenizer.json"))
    check_tokenizer(os.path.join(out, "tokenizer.json"))
    # Written by hand: transformers 5's save_pretrained writes fields transformers 4 cannot read.
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "add_bos_token": True,
        "model_max_length": 32768,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    write_json(os.path.join(out, "tokenizer_config.json"), config)
    write_json(os.path.join(out, "special_tokens_map.json"), {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD})
    return {t: tok.token_to_id(t) for t in SPECIAL}, tok.get_vocab_size()


def make_weights(out, ids, vocab, small):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    # head_dim 64: the CPU attention backend accepts only some head sizes (32, 64, 80, 96, 128, …).
    shape = dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4)
    if not small:
        shape = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    config = LlamaConfig(
        vocab_size=vocab,
        head_dim=64,
        max_position_embeddings=32768,
        bos_token_id=ids[BOS],
        eos_token_id=ids[EOS],
        pad_token_id=ids[PAD],
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
        **shape,
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, sort_keys=True)
        f.write("\n")


def check_tokenizer(path):
    """Fails when training gave another tokenizer than the committed one (another `tokenizers`)."""
    with open(path, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != TOKENIZER_SHA256:
        import tokenizers

        os.replace(path, path + ".unexpected")
        sys.exit(
            f"make_model.py: the trained tokenizer is not the committed one: sha256 {got}, expected "
            f"{TOKENIZER_SHA256} (tokenizers {tokenizers.__version__}; the locks pin 0.23.3). Kept as "
            f"{path}.unexpected. If the pin changed on purpose, update TOKENIZER_SHA256."
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--small100m", action="store_true", help="the ~100 M variant, for comparisons with peers")
    ap.add_argument("--tokenizer-only", action="store_true", help="write the tokenizer only (no torch needed)")
    args = ap.parse_args()
    ids, vocab = make_tokenizer(args.out)
    if args.tokenizer_only:
        print(f"tokenizer ({vocab} tokens) in {args.out}", file=sys.stderr)
        return
    n = make_weights(args.out, ids, vocab, args.small100m)
    print(f"model ({n / 1e6:.1f} M parameters, vocabulary {vocab}) in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
