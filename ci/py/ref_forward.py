#!/usr/bin/env python3
# ref_forward.py: an independent float64 numpy forward pass of the Qwen3 decoder
# (llama.cpp's `qwen3` graph), the oracle for the *architecture math* of tiercheck's Rust
# decoder. It writes a trace in the layout of docs/TRACES.md (producer `numpy-f64`).
#
# What it is:
#   - Reads a GGUF with gguf-py's GGUFReader and dequantizes every tensor with gguf-py's
#     own numpy codecs (gguf.quants.dequantize). Those codecs produce the float32 values
#     ggml's dequantizers define; they are widened exactly to float64 and every operation
#     after that (matmuls, RMSNorm, RoPE, softmax, SiLU, residual adds) runs in float64.
#   - Graph: inp_embd (get_rows of token_embd) -> per layer: RMSNorm * attn_norm; Q/K/V
#     projections (no biases); per-head RMSNorm * attn_q_norm / attn_k_norm; NeoX RoPE
#     (pairs (i, i + d/2), theta_i = pos * base^(-2i/d)); causal grouped-query attention
#     over a KV cache, scale 1/sqrt(head_dim); attn_output + residual; RMSNorm * ffn_norm;
#     SwiGLU MLP (ffn_down(silu(ffn_gate x) * ffn_up x)) + residual -> output_norm ->
#     output (falls back to token_embd when output.weight is absent).
#   - Modes: `decode` (one teacher-forced token per step) and `prompt` (all ids in one
#     step); `--steps N` continues greedily (argmax of the float64 logits, ties to the
#     lowest id) for N more single-token steps. `--selfcheck` runs both modes and asserts
#     they agree (same math, different batching).
#
# What it deliberately does NOT model:
#   - Activation quantization: ggml quantizes the activations to the weight type's
#     vec_dot_type (q8_0, q8_K, ...) before every quantized matmul; here activations stay
#     float64. Expect differences of roughly the activation quantizer's relative step
#     (~1e-3..1e-2 per matmul) against any real ggml/tiercheck run with quantized weights.
#   - float32 rounding anywhere inside the graph (ggml computes in f32, with its own
#     summation orders, FMA contraction, f16/f32 KV cache, flash attention, powf-based
#     RoPE theta recurrence, expf/tanh approximations). Only the trace's stored tensors
#     are rounded, once, from float64 to float32 (round to nearest even) on output.
#   - Anything beyond plain Qwen3: RoPE scaling (YaRN/linear), partial rotary dims,
#     sliding windows, biases, MoE. Such models are refused with an error, not
#     approximated.
#   - The tokenizer: it takes token ids.
# The `top`/`gap` logits in tiercheck.steps are the float64 values (not f32-rounded).
# BLAS is pinned to one thread (unless the caller sets *_NUM_THREADS) for determinism.
import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from gguf import GGUFReader, GGUFValueType  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

ARCH = "qwen3"
PRODUCER = "numpy-f64"
TRACE_FORMAT = "trace-1"
F64 = np.float64

_INT_TYPES = {
    GGUFValueType.UINT8, GGUFValueType.INT8, GGUFValueType.UINT16, GGUFValueType.INT16,
    GGUFValueType.UINT32, GGUFValueType.INT32, GGUFValueType.UINT64, GGUFValueType.INT64,
}
_FLOAT_TYPES = {GGUFValueType.FLOAT32, GGUFValueType.FLOAT64}

LAYER_TENSORS = (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
    "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
)


class ModelError(Exception):
    pass


# ----------------------------------------------------------------------------- metadata

class _Meta:
    def __init__(self, reader, path):
        self.reader = reader
        self.path = path

    def err(self, key, what):
        return ModelError(f"{self.path}: metadata key '{key}': {what}")

    def _field(self, key, required):
        f = self.reader.get_field(key)
        if f is None and required:
            raise self.err(key, "missing")
        return f

    def string(self, key, required=True):
        f = self._field(key, required)
        if f is None:
            return None
        if f.types != [GGUFValueType.STRING]:
            raise self.err(key, f"expected a string, found {[t.name for t in f.types]}")
        return f.contents()

    def int_(self, key, required=True, per_layer=None):
        """A positive integer; with per_layer=n, a per-layer array of n is accepted too
        (returned as a list)."""
        f = self._field(key, required)
        if f is None:
            return None
        t = f.types
        if len(t) == 1 and t[0] in _INT_TYPES:
            v = int(f.contents())
            if v <= 0:
                raise self.err(key, f"must be positive, found {v}")
            return v if per_layer is None else [v] * per_layer
        if per_layer is not None and len(t) == 2 and t[0] == GGUFValueType.ARRAY and t[1] in _INT_TYPES:
            vals = [int(v) for v in f.contents()]
            if len(vals) != per_layer:
                raise self.err(key, f"per-layer array has {len(vals)} entries, block_count is {per_layer}")
            if any(v <= 0 for v in vals):
                raise self.err(key, f"entries must be positive, found {vals}")
            return vals
        raise self.err(key, f"expected an integer, found {[x.name for x in t]}")

    def float_(self, key, required=True):
        f = self._field(key, required)
        if f is None:
            return None
        if len(f.types) != 1 or f.types[0] not in _FLOAT_TYPES:
            raise self.err(key, f"expected a float, found {[x.name for x in f.types]}")
        v = float(f.contents())  # exact widening of the stored f32
        if not np.isfinite(v):
            raise self.err(key, f"not finite: {v}")
        return v


def read_hparams(reader, path):
    m = _Meta(reader, path)
    arch = m.string("general.architecture")
    if arch != ARCH:
        raise m.err("general.architecture", f"expected '{ARCH}', found '{arch}'")
    k = lambda s: f"{ARCH}.{s}"  # noqa: E731
    hp = {}
    hp["n_layer"] = n_layer = m.int_(k("block_count"))
    hp["n_embd"] = n_embd = m.int_(k("embedding_length"))
    heads = m.int_(k("attention.head_count"), per_layer=n_layer)
    heads_kv = m.int_(k("attention.head_count_kv"), per_layer=n_layer)
    if len(set(heads)) != 1:
        raise m.err(k("attention.head_count"), f"per-layer head counts differ ({heads}); not modelled")
    if len(set(heads_kv)) != 1:
        raise m.err(k("attention.head_count_kv"), f"per-layer KV head counts differ ({heads_kv}); not modelled")
    hp["n_head"] = n_head = heads[0]
    hp["n_head_kv"] = n_head_kv = heads_kv[0]
    if n_head % n_head_kv:
        raise m.err(k("attention.head_count_kv"),
                    f"head_count {n_head} is not a multiple of head_count_kv {n_head_kv}")
    hp["n_ff"] = m.int_(k("feed_forward_length"), per_layer=n_layer)
    head_dim = m.int_(k("attention.key_length"), required=False)
    if head_dim is None:
        if n_embd % n_head:
            raise m.err(k("attention.key_length"),
                        f"missing, and embedding_length {n_embd} is not a multiple of head_count {n_head}")
        head_dim = n_embd // n_head
    vdim = m.int_(k("attention.value_length"), required=False)
    if vdim is not None and vdim != head_dim:
        raise m.err(k("attention.value_length"), f"{vdim} differs from key_length {head_dim}; not modelled")
    if head_dim % 2:
        raise m.err(k("attention.key_length"), f"head_dim {head_dim} is odd; NeoX RoPE needs it even")
    hp["head_dim"] = head_dim
    n_rot = m.int_(k("rope.dimension_count"), required=False)
    if n_rot is not None and n_rot != head_dim:
        raise m.err(k("rope.dimension_count"), f"{n_rot} differs from head_dim {head_dim}; partial RoPE not modelled")
    scaling = m.string(k("rope.scaling.type"), required=False)
    if scaling not in (None, "none"):
        raise m.err(k("rope.scaling.type"), f"'{scaling}': RoPE scaling not modelled")
    fscale = m.float_(k("rope.scaling.factor"), required=False)
    if fscale not in (None, 0.0, 1.0) and scaling not in (None, "none"):
        raise m.err(k("rope.scaling.factor"), f"{fscale}: RoPE scaling not modelled")
    hp["rope_base"] = m.float_(k("rope.freq_base"))
    if hp["rope_base"] <= 0:
        raise m.err(k("rope.freq_base"), f"must be positive, found {hp['rope_base']}")
    hp["eps"] = m.float_(k("attention.layer_norm_rms_epsilon"))
    if hp["eps"] < 0:
        raise m.err(k("attention.layer_norm_rms_epsilon"), f"negative: {hp['eps']}")
    hp["n_ctx_train"] = m.int_(k("context_length"), required=False)
    hp["vocab_size_key"] = m.int_(k("vocab_size"), required=False)
    for key in (k("expert_count"), k("attention.sliding_window")):
        f = reader.get_field(key)
        if f is not None and f.types and f.types[0] in _INT_TYPES and int(f.contents()) > 0:
            raise m.err(key, "present: not modelled by this oracle")
    return hp


# ----------------------------------------------------------------------------- model

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Model:
    def __init__(self, path):
        self.path = path
        try:
            reader = GGUFReader(path)
        except (ValueError, OSError) as e:
            raise ModelError(f"{path}: cannot read as GGUF: {e}") from e
        self.hp = hp = read_hparams(reader, path)
        self.sha256 = sha256_file(path)

        tensors = {t.name: t for t in reader.tensors}
        E, H, KV, D = hp["n_embd"], hp["n_head"], hp["n_head_kv"], hp["head_dim"]
        if "token_embd.weight" not in tensors:
            raise ModelError(f"{path}: tensor 'token_embd.weight' missing")
        n_vocab = int(tensors["token_embd.weight"].shape[1]) if len(tensors["token_embd.weight"].shape) == 2 else -1
        if hp["vocab_size_key"] is not None and hp["vocab_size_key"] != n_vocab:
            raise ModelError(f"{path}: metadata key '{ARCH}.vocab_size' is {hp['vocab_size_key']}, "
                             f"token_embd.weight has {n_vocab} rows")
        tok = reader.get_field("tokenizer.ggml.tokens")
        if tok is not None and len(tok.data) != n_vocab:
            raise ModelError(f"{path}: metadata key 'tokenizer.ggml.tokens' has {len(tok.data)} tokens, "
                             f"token_embd.weight has {n_vocab} rows")
        hp["n_vocab"] = n_vocab

        # numpy shapes, (output features, input features): the reverse of ggml's ne order
        expect = {"token_embd.weight": (n_vocab, E), "output_norm.weight": (E,)}
        if "output.weight" in tensors:
            expect["output.weight"] = (n_vocab, E)
        for L in range(hp["n_layer"]):
            F = hp["n_ff"][L]
            shapes = {
                "attn_norm": (E,), "attn_q": (H * D, E), "attn_k": (KV * D, E),
                "attn_v": (KV * D, E), "attn_output": (E, H * D), "attn_q_norm": (D,),
                "attn_k_norm": (D,), "ffn_norm": (E,), "ffn_gate": (F, E), "ffn_up": (F, E),
                "ffn_down": (E, F),
            }
            for n in LAYER_TENSORS:
                expect[f"blk.{L}.{n}.weight"] = shapes[n]
        missing = [n for n in expect if n not in tensors]
        if missing:
            raise ModelError(f"{path}: tensors missing: {', '.join(missing[:8])}"
                             + (" ..." if len(missing) > 8 else ""))
        extra = [n for n in tensors if n not in expect]
        if extra:
            raise ModelError(f"{path}: unexpected tensors (not part of the modelled qwen3 graph, "
                             f"e.g. biases or extra layers): {', '.join(extra[:8])}")

        self.w = {}
        self.types = {}
        for name, shp in expect.items():
            t = tensors[name]
            ggml_np_shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            if ggml_np_shape != shp:
                raise ModelError(f"{path}: tensor '{name}' has ggml dims {list(t.shape.tolist())} "
                                 f"(numpy {ggml_np_shape}), expected numpy shape {shp}")
            try:
                a = dequantize(t.data, t.tensor_type)
            except (NotImplementedError, ValueError, KeyError) as e:
                raise ModelError(f"{path}: tensor '{name}': gguf-py cannot dequantize "
                                 f"{t.tensor_type.name}: {e}") from e
            a = np.asarray(a)
            if a.shape != shp:
                raise ModelError(f"{path}: tensor '{name}' dequantized to shape {a.shape}, expected {shp}")
            a = a.astype(F64)  # exact widening of gguf-py's float32 values
            if not np.all(np.isfinite(a)):
                raise ModelError(f"{path}: tensor '{name}' has non-finite values")
            self.w[name] = np.ascontiguousarray(a)
            self.types[name] = t.tensor_type.name
        if "output.weight" not in self.w:
            self.w["output.weight"] = self.w["token_embd.weight"]  # tied embeddings
        D2 = D // 2
        self.inv_freq = np.power(F64(hp["rope_base"]), -2.0 * np.arange(D2, dtype=F64) / D)


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_neox(x, pos, inv_freq):
    """x: (rows, heads, d); pairs (i, i + d/2) rotated by pos * inv_freq[i]."""
    half = x.shape[-1] // 2
    ang = pos.astype(F64)[:, None] * inv_freq[None, :]
    c = np.cos(ang)[:, None, :]
    s = np.sin(ang)[:, None, :]
    x0, x1 = x[..., :half], x[..., half:]
    return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


class Session:
    """One sequence with its KV cache (post-RoPE K and V, float64)."""

    def __init__(self, model):
        self.m = model
        hp = model.hp
        shape = (hp["n_head_kv"], 0, hp["head_dim"])
        self.k = [np.zeros(shape) for _ in range(hp["n_layer"])]
        self.v = [np.zeros(shape) for _ in range(hp["n_layer"])]
        self.n_past = 0

    def step(self, ids):
        """Evaluates `ids` at positions n_past.. ; returns (taps: list of (name, f64 2-D
        array)), positions)."""
        m, hp, w = self.m, self.m.hp, self.m.w
        E, H, KV, D, eps = hp["n_embd"], hp["n_head"], hp["n_head_kv"], hp["head_dim"], hp["eps"]
        G = H // KV
        rows = len(ids)
        pos = np.arange(self.n_past, self.n_past + rows, dtype=np.int64)
        taps = []
        x = w["token_embd.weight"][np.asarray(ids, dtype=np.int64)]
        taps.append(("inp_embd", x))
        scale = 1.0 / np.sqrt(F64(D))
        for L in range(hp["n_layer"]):
            p = f"blk.{L}."
            cur = rmsnorm(x, w[p + "attn_norm.weight"], eps)
            taps.append((f"attn_norm-{L}", cur))
            q = (cur @ w[p + "attn_q.weight"].T).reshape(rows, H, D)
            k = (cur @ w[p + "attn_k.weight"].T).reshape(rows, KV, D)
            v = cur @ w[p + "attn_v.weight"].T
            q = rope_neox(rmsnorm(q, w[p + "attn_q_norm.weight"], eps), pos, m.inv_freq)
            k = rope_neox(rmsnorm(k, w[p + "attn_k_norm.weight"], eps), pos, m.inv_freq)
            taps.append((f"Qcur-{L}", q.reshape(rows, H * D)))
            taps.append((f"Kcur-{L}", k.reshape(rows, KV * D)))
            taps.append((f"Vcur-{L}", v))
            self.k[L] = np.concatenate([self.k[L], k.transpose(1, 0, 2)], axis=1)
            self.v[L] = np.concatenate([self.v[L], v.reshape(rows, KV, D).transpose(1, 0, 2)], axis=1)
            Kc, Vc = self.k[L], self.v[L]  # (KV, T, D)
            T = Kc.shape[1]
            # head h = kv*G + g reads kv head h // G
            qg = q.transpose(1, 0, 2).reshape(KV, G * rows, D)
            s = (qg @ Kc.transpose(0, 2, 1)).reshape(KV, G, rows, T) * scale
            allowed = np.arange(T)[None, :] <= pos[:, None]  # causal: key pos <= query pos
            s = np.where(allowed[None, None], s, -np.inf)
            s = s - s.max(axis=-1, keepdims=True)
            pr = np.exp(s)
            pr = pr / pr.sum(axis=-1, keepdims=True)
            o = pr.reshape(KV, G * rows, T) @ Vc  # (KV, G*rows, D)
            kqv = o.reshape(H, rows, D).transpose(1, 0, 2).reshape(rows, H * D)
            taps.append((f"kqv_out-{L}", kqv))
            ffn_inp = kqv @ w[p + "attn_output.weight"].T + x
            taps.append((f"ffn_inp-{L}", ffn_inp))
            cur = rmsnorm(ffn_inp, w[p + "ffn_norm.weight"], eps)
            taps.append((f"ffn_norm-{L}", cur))
            g = cur @ w[p + "ffn_gate.weight"].T
            u = cur @ w[p + "ffn_up.weight"].T
            act = silu(g) * u
            taps.append((f"ffn_swiglu-{L}", act))
            ffn_out = act @ w[p + "ffn_down.weight"].T
            taps.append((f"ffn_out-{L}", ffn_out))
            x = ffn_out + ffn_inp
            taps.append((f"l_out-{L}", x))
        cur = rmsnorm(x, w["output_norm.weight"], eps)
        taps.append(("result_norm", cur))
        taps.append(("result_output", cur @ w["output.weight"].T))
        self.n_past += rows
        return taps, pos


def pick(logits):
    """Greedy token (ties to the lowest id), the five best [id, logit], top1 - top2."""
    order = np.lexsort((np.arange(logits.shape[0]), -logits))
    top = [[int(i), float(logits[i])] for i in order[:5]]
    gap = float(logits[order[0]] - logits[order[1]]) if logits.shape[0] > 1 else float("inf")
    return int(order[0]), top, gap


def run(model, ids, mode, n_greedy):
    """Returns a list of step records {step, positions, input_ids, emitted, top, gap, taps}."""
    sess = Session(model)
    batches = [[t] for t in ids] if mode == "decode" else [list(ids)]
    steps = []
    nxt = None
    for i in range(len(batches) + n_greedy):
        inp = batches[i] if i < len(batches) else [nxt]
        taps, pos = sess.step(inp)
        logits = dict(taps)["result_output"][-1]
        nxt, top, gap = pick(logits)
        steps.append({"step": i, "positions": [int(p) for p in pos], "input_ids": [int(t) for t in inp],
                      "emitted": nxt, "top": top, "gap": gap, "taps": taps})
    return steps


# ----------------------------------------------------------------------------- trace

def write_trace(path, model, mode, ids, steps):
    if len(steps) > 1000:
        raise ModelError(f"{len(steps)} steps: tensor names NNN/TAP allow at most 1000")
    tensors = []
    for st in steps:
        for tap, a in st["taps"]:
            tensors.append((f"{st['step']:03d}/{tap}", np.ascontiguousarray(a, dtype="<f4")))
    meta_steps = [{k: st[k] for k in ("step", "positions", "input_ids", "emitted", "top", "gap")}
                  for st in steps]
    metadata = {
        "tiercheck.format": TRACE_FORMAT,
        "tiercheck.steps": json.dumps(meta_steps, separators=(",", ":")),
        "producer": PRODUCER,
        "model_sha256": model.sha256,
        "mode": mode,
        "prompt_ids": json.dumps([int(t) for t in ids], separators=(",", ":")),
    }
    write_safetensors(path, tensors, metadata)


def write_safetensors(path, tensors, metadata):
    """Standard safetensors: u64 LE header length, JSON header, raw little-endian data."""
    header = {"__metadata__": metadata}
    off = 0
    for name, a in tensors:
        assert a.dtype == np.dtype("<f4") and a.ndim == 2, name
        header[name] = {"dtype": "F32", "shape": [int(s) for s in a.shape], "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, a in tensors:
            f.write(a.tobytes())
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- self-check

def selfcheck(model, ids, n_greedy, tol):
    """decode vs prompt mode on the same ids: every tap, row by row, must agree to `tol`
    relative (max |a - b| over a tap, divided by the tap's max |b|)."""
    dec = run(model, ids, "decode", n_greedy)
    pro = run(model, ids, "prompt", n_greedy)
    n = len(ids)
    per_tap = {}  # tap -> [max abs diff, max abs ref, max elementwise rel, f32 mismatches, count]
    pairs = []  # (decode step record, row-slice of the prompt tap dict)
    p0 = dict(pro[0]["taps"])
    for r in range(n):
        pairs.append((dec[r], {t: a[r:r + 1] for t, a in p0.items()}))
    for j in range(n_greedy):
        pairs.append((dec[n + j], dict(pro[1 + j]["taps"])))
    token_mismatch = []
    for r in range(n):
        a = int(np.lexsort((np.arange(p0["result_output"].shape[1]), -p0["result_output"][r]))[0])
        if a != dec[r]["emitted"]:
            token_mismatch.append((r, dec[r]["emitted"], a))
    for j in range(n_greedy):
        if dec[n + j]["input_ids"] != pro[1 + j]["input_ids"] or dec[n + j]["emitted"] != pro[1 + j]["emitted"]:
            token_mismatch.append((n + j, dec[n + j]["emitted"], pro[1 + j]["emitted"]))
    for d, pt in pairs:
        for tap, a in d["taps"]:
            b = pt[tap]
            assert a.shape == b.shape, (tap, a.shape, b.shape)
            diff = np.abs(a - b)
            ref = np.abs(b)
            floor = max(float(ref.max()), 1e-300) * 1e-6
            erel = float((diff / np.maximum(ref, floor)).max())
            f32m = int(np.count_nonzero(a.astype(np.float32) != b.astype(np.float32)))
            e = per_tap.setdefault(tap.split("-")[0], [0.0, 0.0, 0.0, 0, 0])
            e[0] = max(e[0], float(diff.max()))
            e[1] = max(e[1], float(ref.max()))
            e[2] = max(e[2], erel)
            e[3] += f32m
            e[4] += a.size
    worst = 0.0
    print(f"selfcheck: decode ({len(dec)} steps) vs prompt ({len(pro)} steps), {n} teacher-forced ids, "
          f"{n_greedy} greedy")
    print(f"  {'tap':<14}{'max|d|/max|ref|':>18}{'max elem rel':>15}{'f32 differ':>16}")
    for tap, (md, mr, er, f32m, cnt) in per_tap.items():
        rel = md / mr if mr > 0 else md
        worst = max(worst, rel)
        print(f"  {tap:<14}{rel:>18.3e}{er:>15.3e}{f32m:>9}/{cnt:<8}")
    print(f"  max relative difference (per tap, over its max |value|): {worst:.3e} (tolerance {tol:g})")
    print(f"  greedy tokens: decode {[s['emitted'] for s in dec]}")
    ok = worst <= tol and not token_mismatch
    if token_mismatch:
        print(f"  token mismatches (step, decode, prompt): {token_mismatch}")
    print("selfcheck: " + ("PASS" if ok else "FAIL"))
    return ok, dec, pro


# ----------------------------------------------------------------------------- main

def parse_ids(s):
    try:
        ids = [int(x) for x in s.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise ModelError(f"--ids: expected comma-separated integers, got '{s}'")
    if not ids:
        raise ModelError("--ids: empty")
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(description="float64 numpy reference forward pass of a qwen3 GGUF; "
                                             "writes a docs/TRACES.md trace")
    ap.add_argument("--model", required=True, help="qwen3 GGUF file")
    ap.add_argument("--ids", required=True, help="teacher-forced token ids, e.g. 1,2,3")
    ap.add_argument("--mode", choices=("decode", "prompt"), help="decode: one token per step; "
                    "prompt: all ids in one step")
    ap.add_argument("--out", help="trace to write (.safetensors)")
    ap.add_argument("--steps", type=int, default=0, help="greedy single-token steps after the ids")
    ap.add_argument("--selfcheck", action="store_true", help="run decode and prompt modes and assert "
                    "they agree; with --out and --mode also writes that mode's trace")
    ap.add_argument("--tol", type=float, default=1e-12, help="self-check relative tolerance")
    a = ap.parse_args(argv)
    prog = os.path.basename(sys.argv[0])
    try:
        if a.steps < 0:
            raise ModelError("--steps must be >= 0")
        if not a.selfcheck and (a.mode is None or a.out is None):
            ap.error("--mode and --out are required (unless --selfcheck)")
        if a.out and a.mode is None:
            ap.error("--out needs --mode")
        ids = parse_ids(a.ids)
        t0 = time.perf_counter()
        model = Model(a.model)
        hp = model.hp
        bad = [t for t in ids if not 0 <= t < hp["n_vocab"]]
        if bad:
            raise ModelError(f"--ids: {bad[:5]} out of range for n_vocab {hp['n_vocab']}")
        total = len(ids) + a.steps
        if hp["n_ctx_train"] is not None and total > hp["n_ctx_train"]:
            raise ModelError(f"{a.model}: {total} tokens exceed metadata key '{ARCH}.context_length' "
                             f"({hp['n_ctx_train']})")
        t1 = time.perf_counter()
        print(f"{prog}: {a.model}: {hp['n_layer']} layers, n_embd {hp['n_embd']}, heads {hp['n_head']}/"
              f"{hp['n_head_kv']} x {hp['head_dim']}, n_ff {hp['n_ff'][0]}, n_vocab {hp['n_vocab']}, "
              f"types {sorted(set(model.types.values()))}, load {t1 - t0:.2f}s", file=sys.stderr)
        ok = True
        if a.selfcheck:
            ok, dec, pro = selfcheck(model, ids, a.steps, a.tol)
            steps = dec if a.mode == "decode" else pro
        elif a.out:
            steps = run(model, ids, a.mode, a.steps)
        t2 = time.perf_counter()
        if a.out:
            write_trace(a.out, model, a.mode, ids, steps)
        t3 = time.perf_counter()
        print(f"{prog}: forward {t2 - t1:.2f}s, write {t3 - t2:.2f}s"
              + (f", emitted {[s['emitted'] for s in steps]}" if a.out else ""), file=sys.stderr)
        return 0 if ok else 1
    except ModelError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
