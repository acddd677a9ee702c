#!/usr/bin/env python3
"""Write the tiny Llama as a GGUF file for llama.cpp, with only `gguf` and numpy (no torch).

    make_gguf.py TOKENIZER_DIR OUT.gguf

TOKENIZER_DIR is what `make_model.py --tokenizer-only` (or make_model.py) wrote: the vocabulary,
merges, special tokens and chat template are the same as the vLLM model's. The weights are random,
from a fixed seed, with the shape of make_model.py's 3.3 M model.
"""

import argparse
import json
import os

import gguf
import numpy as np

SEED = 20261202
HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM, CTX = 256, 512, 2, 4, 2, 64, 32768


def vocabulary(tok_dir):
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    with open(os.path.join(tok_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    vocab = dict(tj["model"]["vocab"])
    special = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
    vocab.update(special)
    tokens = [""] * (max(vocab.values()) + 1)
    for text, i in vocab.items():
        tokens[i] = text
    types = [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens]
    # tokenizers >= 0.20 stores a merge as a pair; GGUF wants "left right".
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    ids = {name: vocab[cfg[name]] for name in ("bos_token", "eos_token", "pad_token")}
    return tokens, types, merges, ids, cfg["chat_template"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out")
    args = ap.parse_args()

    tokens, types, merges, ids, template = vocabulary(args.tokenizer_dir)
    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("tiny-llama")
    w.add_context_length(CTX)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    # Our BPE's pre-tokenizer is the GPT-2 byte-level one; its hash is unknown to llama.cpp.
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(ids["bos_token"])
    w.add_eos_token_id(ids["eos_token"])
    w.add_pad_token_id(ids["pad_token"])
    w.add_add_bos_token(True)
    w.add_chat_template(template)

    rng = np.random.default_rng(SEED)

    def weight(rows, cols):
        # PyTorch's (out, in) layout is what GGUF expects for a matrix.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(HIDDEN, dtype=np.float32)
    w.add_tensor("token_embd.weight", weight(len(tokens), HIDDEN))
    for b in range(LAYERS):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", weight(HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(p + "attn_k.weight", weight(KV_HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(p + "attn_v.weight", weight(KV_HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(p + "attn_output.weight", weight(HIDDEN, HEADS * HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", weight(INTER, HIDDEN))
        w.add_tensor(p + "ffn_up.weight", weight(INTER, HIDDEN))
        w.add_tensor(p + "ffn_down.weight", weight(HIDDEN, INTER))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", weight(len(tokens), HIDDEN))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {os.path.getsize(args.out) / 1e6:.1f} MB, vocabulary {len(tokens)}")


if __name__ == "__main__":
    main()
