#!/usr/bin/env python3
"""Write a small random qwen3 GGUF with gguf-py (test input for ci/py/ref_forward.py)."""
import argparse

import numpy as np
import gguf
from gguf import GGUFWriter, GGMLQuantizationType as T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--embd", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--ff", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=3072)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tied", action="store_true", help="no output.weight")
    ap.add_argument("--no-key-length", action="store_true")
    ap.add_argument("--omit", default="", help="metadata key suffix to leave out (for error tests)")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    w = GGUFWriter(a.out, "qwen3")
    kv = {
        "context_length": lambda: w.add_context_length(4096),
        "embedding_length": lambda: w.add_embedding_length(a.embd),
        "block_count": lambda: w.add_block_count(a.layers),
        "feed_forward_length": lambda: w.add_feed_forward_length(a.ff),
        "attention.head_count": lambda: w.add_head_count(a.heads),
        "attention.head_count_kv": lambda: w.add_head_count_kv(a.kv_heads),
        "rope.freq_base": lambda: w.add_rope_freq_base(1000000.0),
        "attention.layer_norm_rms_epsilon": lambda: w.add_layer_norm_rms_eps(1e-6),
    }
    if not a.no_key_length:
        kv["attention.key_length"] = lambda: w.add_key_length(a.head_dim)
        kv["attention.value_length"] = lambda: w.add_value_length(a.head_dim)
        kv["rope.dimension_count"] = lambda: w.add_rope_dimension_count(a.head_dim)
    for k, f in kv.items():
        if k != a.omit:
            f()
    w.add_file_type(7)
    w.add_vocab_size(a.vocab)
    w.add_tokenizer_model("none")

    def mat(name, out_f, in_f, qt):
        x = (rng.standard_normal((out_f, in_f)) / np.sqrt(in_f)).astype(np.float32)
        if qt == T.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qt), raw_dtype=qt)

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    E, H, KV, D = a.embd, a.heads, a.kv_heads, a.head_dim
    x = rng.standard_normal((a.vocab, E)).astype(np.float32)
    w.add_tensor("token_embd.weight", gguf.quants.quantize(x, T.Q8_0), raw_dtype=T.Q8_0)
    for L in range(a.layers):
        p = f"blk.{L}."
        q8 = T.Q8_0
        alt = T.F32 if L % 2 == 0 else T.Q8_0  # mix F32 and Q8_0 matrices
        norm(p + "attn_norm.weight", E)
        mat(p + "attn_q.weight", H * D, E, q8)
        mat(p + "attn_k.weight", KV * D, E, alt)
        mat(p + "attn_v.weight", KV * D, E, q8)
        mat(p + "attn_output.weight", E, H * D, alt)
        norm(p + "attn_q_norm.weight", D)
        norm(p + "attn_k_norm.weight", D)
        norm(p + "ffn_norm.weight", E)
        mat(p + "ffn_gate.weight", a.ff, E, q8)
        mat(p + "ffn_up.weight", a.ff, E, alt)
        mat(p + "ffn_down.weight", E, a.ff, q8)
    norm("output_norm.weight", E)
    if not a.tied:
        mat("output.weight", a.vocab, E, T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
