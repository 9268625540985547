#!/usr/bin/env python3
# tiercheck-capture: per-layer taps of a real llama.cpp run as a tiercheck trace
# (docs/TRACES.md). Loads a libllama (a build folder or file, or the one inside an
# installed llama-cpp-python) in process through ctypes, evaluates teacher-forced ids in
# decode mode (one token per llama_decode) or prompt mode (one batch) with the engine's
# own settings (repack on/off, K/V cache type, flash attention, threads, GPU layers), and
# writes every tap with the build's CPU features and the repack layouts ggml logged. The
# aarch64 builds of the project's oracle also run through the static driver
# ci/oracle-driver/llamataps.c, under qemu-aarch64 on an x86 host.
#
#   tiercheck-capture --lib DIR|FILE --model FILE.gguf --ids 1,2,3 --mode decode|prompt \
#       --out TRACE.safetensors [--threads N] [--no-repack] [--steps N] [--kv f32|f16]
#       [--fa on|off] [--ctx N] [--batch N] [--ubatch N] [--logits all|last]
#       [--state-in FILE] [--state-out FILE] [--no-taps] [--gpu-layers N] [--verbose]
#   tiercheck-capture --llama-cpp-python --model ... (the libllama of the installed package)
#   tiercheck-capture --driver BIN [--qemu-cpu MODEL] --model ... (the same options)
#
# (`python -m tiercheck_capture` is the same.) BIN is the project's
# `TIERCHECK_ORACLE_LLAMA_ARM_*` driver (run with QEMU_CPU = MODEL: neoverse-n1 for
# dotprod, `max,sve=off` for i8mm, `max,sve128=on` / `max,sve256=on` for the SVE builds;
# an empty MODEL runs BIN directly, for a driver built for this host).
#
# DIR is a folder with libllama.so and the ggml libraries beside it (RUNPATH $ORIGIN), as
# a llama.cpp build or the project's `TIERCHECK_ORACLE_LLAMA` has them. Needs numpy only
# (no llama-cpp-python, no safetensors package). The ctypes mirrors below are those of
# llama.h at llama.cpp 0c1e570 (llama-cpp-python 0.3.36); another version whose structs
# differ is refused at start-up by the checks listed below, not run.
#
# What it does:
#   - Plain ctypes against llama.h / ggml.h of the vendored llama.cpp (llama-cpp-python
#     0.3.36 sdist, llama.cpp 0c1e570, ggml 0.25.3). The struct mirrors below were checked
#     field by field against that header with a C program (offsetof/sizeof):
#       ggml_tensor 336 bytes: type@0 buffer@8 ne[4]@16 nb[4]@48 op@80 op_params[16]@84
#         flags@148 src[10]@152 view_src@232 view_offs@240 data@248 name[64]@256 extra@320
#         (GGML_MAX_DIMS 4, GGML_MAX_SRC 10, GGML_MAX_NAME 64, GGML_MAX_OP_PARAMS 64);
#       llama_model_params 80, llama_context_params 160 (cb_eval@88, type_k@104,
#         flash_attn_type@52), llama_batch 56, llama_model_quantize_params 64.
#     At run time it re-checks what it can: sizeof(ggml_tensor) = ggml_tensor_overhead() -
#     sizeof(ggml_object) (32), the name offset against ggml_get_name(), and the default
#     values of the parameter structs (a shifted field would show there).
#   - Model: llama_model_load_from_file, CPU only; `use_extra_bufts` on (weight repacking,
#     e.g. Q4_K -> q4_K_8x8 on AVX2) unless --no-repack.
#   - Context: n_ctx --ctx (default 512), n_batch --batch and n_ubatch --ubatch (default
#     512 each; llama.cpp caps n_batch at n_ctx and n_ubatch at n_batch, and the trace
#     records the sizes it ran with), by default flash attention DISABLED and K and V
#     cache F32 (--fa on, --kv f16: llama.cpp's own defaults; recorded in the trace
#     metadata `kv` and `fa`), a cb_eval callback. --logits all (default) asks for every
#     row's logits; --logits last for the prompt's last row only, as llama-cli and
#     llama-server ask (metadata `logits`). With flash attention there is no `kq-L` node,
#     so `llama.n_kv` stays empty.
#   - Batches and graphs: a prompt step goes to llama_decode in batches of n_batch ids
#     (as llama-server submits a prompt), and llama.cpp evaluates each batch as ubatches
#     of n_ubatch rows, one graph each. A graph begins with its token-embedding node;
#     each graph's taps are collected on their own ("last node of a name wins" within a
#     graph), checked to have the graph's rows (its embedding rows must be the ubatch
#     size this script expects, so a different split is an error), and appended in order:
#     a step's tap holds all its rows. The step record lists the graphs' row counts
#     (`ubatches`) and, when not every row is an output, the output rows (`outputs`).
#   - cb_eval: ggml's scheduler asks (ask=true) about every graph node in order; the script
#     answers true for the taps of docs/TRACES.md and is called again (ask=false) once that
#     node is computed, and copies it out with ggml_backend_tensor_get (strided gather for
#     non-contiguous views; F32 only). Several nodes carry the same name (llama.cpp names the
#     Q matmul, its reshape and the post-RoPE node all `Qcur-L`; the same for Kcur and Vcur):
#     the LAST one computed wins, i.e. the post-RoPE value. Nodes that are not asked for are
#     computed together with the next asked-for one, so graph fusions between unasked nodes
#     (ggml-cpu fuses RMS_NORM + MUL) still happen; nodes named `norm-L` (the bare RMSNorm)
#     are never asked for.
#   - llama.cpp names the token-embedding node `embd`; it is stored as the trace tap
#     `inp_embd` (see TAP_ALIASES). In the last layer llama.cpp inserts get_rows(out_ids)
#     before `ffn_inp`: that layer's `ffn_inp`, `ffn_norm`, `ffn_swiglu`, `ffn_out`,
#     `l_out` and `result_norm`, `result_output` hold the output rows only (every row
#     with --logits all; a graph without an output row contributes none).
#   - Saved caches: --state-in loads a sequence state (llama_state_seq_load_file) before
#     the ids, which continue after its cells (llama_memory_seq_pos_max + 1); --state-out
#     saves the sequence (llama_state_seq_save_file: the loaded tokens and every id fed)
#     after the last step, written to FILE.tmp and renamed; --no-taps asks for no node
#     (a run that only fills a cache). --ids @FILE reads the ids from a file.
#   - Teacher forcing: mode `decode` calls llama_decode once per id (positions 0..n-1, one
#     row each); mode `prompt` calls it once with all ids (one step, n rows). --steps N then
#     continues greedily with N single-token steps (argmax of the last logits row, ties to
#     the lowest id).
#   - Every row of `result_output` must equal llama_get_logits_ith bitwise (the logits
#     llama.cpp hands out are copied from that very node); the script fails otherwise.
#   - Trace metadata: producer, model_sha256, mode, prompt_ids, repack, threads, arch, plus
#     llama.n_kv (the KV lengths the attention ran over, from the `kq-L` nodes: llama.cpp
#     pads n_kv to a multiple of 256, capped at n_ctx, so 256 up to position 255, then
#     512; masked positions are -inf before the softmax) and llama.repacked (JSON: weight
#     name -> repack layout, from ggml-cpu's log, e.g. q4_K_8x8; Q6_K and Q8_0 have no AVX2
#     repack layout and stay plain).
#
# Measured with this script on random 2-layer qwen3 GGUFs (hidden 512, F32/Q8_0/Q4_K_M):
#   - every tap matches a layer-local float64 numpy recomputation from the previous taps to
#     ~4e-7 relative (F32 weights), so the tap semantics above hold (Qcur/Kcur post-RoPE);
#   - logits with and without cb_eval are bitwise equal; 1 and 2 threads are bitwise equal;
#   - ggml-cpu still fuses RMS_NORM + MUL under this cb_eval (9 fused calls, the same count
#     as without a callback, for 2 layers), and GGML_CPU_DISABLE_FUSION=1 gives bitwise
#     identical taps anyway: the fused kernel computes (x*scale)*w like the unfused pair.
import argparse
import ctypes as C
import hashlib
import json
import os
import re
import sys

import numpy as np

from . import trace_io  # noqa: E402

PRODUCER = "llama.cpp-haswell"

# ggml_cpu_has_<name> queries recorded as the trace's `cpu_features`.
CPU_FEATURES = ["sse3", "ssse3", "avx", "avx_vnni", "avx2", "bmi2", "f16c", "fma", "avx512",
                "avx512_vbmi", "avx512_vnni", "avx512_bf16", "amx_int8", "neon", "arm_fma",
                "fp16_va", "dotprod", "matmul_int8", "sve", "sme", "riscv_v", "vsx"]
N_CTX = 512
MAX_CTX = 32768
# llama_numa_init's strategies (enum ggml_numa_strategy), as llama-cli's --numa names them.
NUMA_STRATEGIES = {"distribute": 1, "isolate": 2, "numactl": 3}

# Per-layer taps (llama.cpp eval-callback names, suffixed -L) and global taps, in the
# order they are written to the trace.
LAYER_TAPS = ["attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "ffn_inp", "ffn_norm",
              "ffn_swiglu", "ffn_out", "l_out"]
# A mixture-of-experts model's (qwen3moe: build_moe_ffn's names). `ffn_moe_topk` is the
# I32 view of the expert indices, stored as floats (exact below 2^24).
MOE_LAYER_TAPS = ["attn_norm", "Qcur", "Kcur", "Vcur", "kqv_out", "ffn_inp", "ffn_norm",
                  "ffn_moe_logits", "ffn_moe_probs", "ffn_moe_topk", "ffn_moe_weights",
                  "ffn_moe_weights_sum", "ffn_moe_weights_norm", "ffn_moe_up", "ffn_moe_gate",
                  "ffn_moe_swiglu", "ffn_moe_down", "ffn_moe_weighted", "ffn_moe_out", "l_out"]
MOE_ARCHS = ["qwen3moe"]


def layer_taps(arch):
    """The per-layer taps of a model of `arch` (llama_model_desc's first word)."""
    return MOE_LAYER_TAPS if arch in MOE_ARCHS else LAYER_TAPS
GLOBAL_TAPS = ["inp_embd", "result_norm", "result_output"]
# llama.cpp node name -> trace tap name, where they differ. In this llama.cpp the token
# embedding rows (get_rows of token_embd) are the node `embd`; its `inp_embd` is the graph
# INPUT for caller-supplied embedding vectors (unused with token batches), never captured.
TAP_ALIASES = {"embd": "inp_embd"}
# Taps llama.cpp computes for the output rows only (after get_rows(inp_out_ids) in the
# last layer); `LAST` stands for the last layer's index.
PRUNED_LAYER_TAPS = ["ffn_inp", "ffn_norm", "ffn_swiglu", "ffn_out", "l_out"] + [
    t for t in MOE_LAYER_TAPS if t.startswith("ffn_moe_")]
PRUNED_GLOBAL_TAPS = ["result_norm", "result_output"]


def is_pruned(tap, n_layer):
    if tap in PRUNED_GLOBAL_TAPS:
        return True
    kind, _, layer = tap.rpartition("-")
    return kind in PRUNED_LAYER_TAPS and layer == str(n_layer - 1)


def ubatches(n, n_batch, n_ubatch):
    """Row counts of the graphs a step of n rows is evaluated as: batches of n_batch, each
    cut into ubatches of n_ubatch (llama.cpp's split_simple for one sequence)."""
    out = []
    left = n
    while left > 0:
        b = min(left, n_batch)
        left -= b
        while b > 0:
            u = min(b, n_ubatch)
            out.append(u)
            b -= u
    return out


# The op the kept (last) node of a tap must have: checks that "last wins" picked the
# post-RoPE node and not the matmul or reshape of the same name.
EXPECTED_OP = {"Qcur": "ROPE", "Kcur": "ROPE", "inp_embd": "GET_ROWS"}

GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
GGML_TYPE_I32 = 26
LLAMA_FLASH_ATTN_TYPE_DISABLED = 0
LLAMA_FLASH_ATTN_TYPE_ENABLED = 1
KV_TYPES = {"f32": GGML_TYPE_F32, "f16": GGML_TYPE_F16}
GGML_OBJECT_SIZE = 32  # struct ggml_object: offs, size, next, type, padding[4]


class OracleError(Exception):
    pass


# ----------------------------------------------------------------------------- ctypes

class GgmlTensor(C.Structure):
    _fields_ = [
        ("type", C.c_int),
        ("buffer", C.c_void_p),
        ("ne", C.c_int64 * 4),
        ("nb", C.c_size_t * 4),
        ("op", C.c_int),
        ("op_params", C.c_int32 * 16),
        ("flags", C.c_int32),
        ("src", C.c_void_p * 10),
        ("view_src", C.c_void_p),
        ("view_offs", C.c_size_t),
        ("data", C.c_void_p),
        ("name", C.c_char * 64),
        ("extra", C.c_void_p),
        ("padding", C.c_char * 8),
    ]


class LlamaModelParams(C.Structure):
    _fields_ = [
        ("devices", C.c_void_p),
        ("tensor_buft_overrides", C.c_void_p),
        ("n_gpu_layers", C.c_int32),
        ("split_mode", C.c_int),
        ("load_mode", C.c_int),
        ("lazy_mode", C.c_int),
        ("main_gpu", C.c_int32),
        ("tensor_split", C.c_void_p),
        ("progress_callback", C.c_void_p),
        ("progress_callback_user_data", C.c_void_p),
        ("kv_overrides", C.c_void_p),
        ("vocab_only", C.c_bool),
        ("check_tensors", C.c_bool),
        ("use_extra_bufts", C.c_bool),
        ("no_host", C.c_bool),
        ("no_alloc", C.c_bool),
        ("load_mtp", C.c_bool),
    ]


EVAL_CB = C.CFUNCTYPE(C.c_bool, C.POINTER(GgmlTensor), C.c_bool, C.c_void_p)
LOG_CB = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)


class LlamaContextParams(C.Structure):
    _fields_ = [
        ("n_ctx", C.c_uint32),
        ("n_batch", C.c_uint32),
        ("n_ubatch", C.c_uint32),
        ("n_seq_max", C.c_uint32),
        ("n_rs_seq", C.c_uint32),
        ("n_outputs_max", C.c_uint32),
        ("n_outputs_max_per_seq", C.c_uint32),
        ("n_threads", C.c_int32),
        ("n_threads_batch", C.c_int32),
        ("ctx_type", C.c_int),
        ("rope_scaling_type", C.c_int),
        ("pooling_type", C.c_int),
        ("attention_type", C.c_int),
        ("flash_attn_type", C.c_int),
        ("rope_freq_base", C.c_float),
        ("rope_freq_scale", C.c_float),
        ("yarn_ext_factor", C.c_float),
        ("yarn_attn_factor", C.c_float),
        ("yarn_beta_fast", C.c_float),
        ("yarn_beta_slow", C.c_float),
        ("yarn_orig_ctx", C.c_uint32),
        ("defrag_thold", C.c_float),
        ("cb_eval", EVAL_CB),
        ("cb_eval_user_data", C.c_void_p),
        ("type_k", C.c_int),
        ("type_v", C.c_int),
        ("abort_callback", C.c_void_p),
        ("abort_callback_data", C.c_void_p),
        ("embeddings", C.c_bool),
        ("offload_kqv", C.c_bool),
        ("no_perf", C.c_bool),
        ("op_offload", C.c_bool),
        ("swa_full", C.c_bool),
        ("kv_unified", C.c_bool),
        ("samplers", C.c_void_p),
        ("n_samplers", C.c_size_t),
        ("ctx_other", C.c_void_p),
    ]


class LlamaBatch(C.Structure):
    _fields_ = [
        ("n_tokens", C.c_int32),
        ("token", C.POINTER(C.c_int32)),
        ("embd", C.POINTER(C.c_float)),
        ("pos", C.POINTER(C.c_int32)),
        ("n_seq_id", C.POINTER(C.c_int32)),
        ("seq_id", C.POINTER(C.POINTER(C.c_int32))),
        ("logits", C.POINTER(C.c_int8)),
    ]


class LlamaModelQuantizeParams(C.Structure):
    _fields_ = [
        ("nthread", C.c_int32),
        ("ftype", C.c_int),
        ("output_tensor_type", C.c_int),
        ("token_embedding_type", C.c_int),
        ("allow_requantize", C.c_bool),
        ("quantize_output_tensor", C.c_bool),
        ("only_copy", C.c_bool),
        ("pure", C.c_bool),
        ("keep_split", C.c_bool),
        ("dry_run", C.c_bool),
        ("imatrix", C.c_void_p),
        ("kv_overrides", C.c_void_p),
        ("tt_overrides", C.c_void_p),
        ("prune_layers", C.c_void_p),
        ("max_buf_size", C.c_size_t),
    ]


_EXPECTED_SIZES = {GgmlTensor: 336, LlamaModelParams: 80, LlamaContextParams: 160,
                   LlamaBatch: 56, LlamaModelQuantizeParams: 64}

GGML_LOG_LEVELS = {0: "NONE", 1: "DEBUG", 2: "INFO", 3: "WARN", 4: "ERROR", 5: "CONT"}


class Llama:
    """The libllama.so of one build folder, with the entry points this script uses."""

    def __init__(self, lib_dir, verbose=False):
        for cls, size in _EXPECTED_SIZES.items():
            if C.sizeof(cls) != size:
                raise OracleError(f"ctypes mirror {cls.__name__} is {C.sizeof(cls)} bytes, "
                                  f"the header says {size}")
        if os.path.isfile(lib_dir):
            path, lib_dir = lib_dir, os.path.dirname(lib_dir) or "."
        else:
            path = os.path.join(lib_dir, "libllama.so")
        if not os.path.isfile(path):
            raise OracleError(f"{path} does not exist (a llama.cpp build folder, its libllama.so, "
                              "or --llama-cpp-python)")
        self.lib_dir = os.path.realpath(lib_dir)
        self.lib = C.CDLL(path, mode=C.RTLD_GLOBAL)
        self._check_loaded_from_dir()
        self.verbose = verbose
        self.log_lines = []
        self._last_level = 2
        self._log_cb = LOG_CB(self._on_log)  # kept alive as long as self
        L = self.lib

        def fn(name, res, *args):
            f = getattr(L, name)  # dlsym on libllama's handle also searches its ggml deps
            f.restype = res
            f.argtypes = list(args)
            return f

        vp = C.c_void_p
        self.llama_log_set = fn("llama_log_set", None, LOG_CB, vp)
        self.llama_log_set(self._log_cb, None)
        self.ggml_log_set = fn("ggml_log_set", None, LOG_CB, vp)
        self.ggml_log_set(self._log_cb, None)
        self.llama_backend_init = fn("llama_backend_init", None)
        self.llama_model_default_params = fn("llama_model_default_params", LlamaModelParams)
        self.llama_context_default_params = fn("llama_context_default_params", LlamaContextParams)
        self.llama_model_quantize_default_params = fn(
            "llama_model_quantize_default_params", LlamaModelQuantizeParams)
        self.llama_model_load_from_file = fn("llama_model_load_from_file", vp, C.c_char_p,
                                             LlamaModelParams)
        self.llama_model_free = fn("llama_model_free", None, vp)
        self.llama_init_from_model = fn("llama_init_from_model", vp, vp, LlamaContextParams)
        self.llama_free = fn("llama_free", None, vp)
        self.llama_model_get_vocab = fn("llama_model_get_vocab", vp, vp)
        self.llama_vocab_n_tokens = fn("llama_vocab_n_tokens", C.c_int32, vp)
        self.llama_model_n_embd = fn("llama_model_n_embd", C.c_int32, vp)
        self.llama_model_n_layer = fn("llama_model_n_layer", C.c_int32, vp)
        self.llama_model_n_head = fn("llama_model_n_head", C.c_int32, vp)
        self.llama_model_n_head_kv = fn("llama_model_n_head_kv", C.c_int32, vp)
        self.llama_model_desc = fn("llama_model_desc", C.c_int32, vp, C.c_char_p, C.c_size_t)
        self.llama_batch_init = fn("llama_batch_init", LlamaBatch, C.c_int32, C.c_int32, C.c_int32)
        self.llama_batch_free = fn("llama_batch_free", None, LlamaBatch)
        self.llama_decode = fn("llama_decode", C.c_int32, vp, LlamaBatch)
        self.llama_get_logits_ith = fn("llama_get_logits_ith", C.POINTER(C.c_float), vp, C.c_int32)
        self.llama_n_batch = fn("llama_n_batch", C.c_uint32, vp)
        self.llama_n_ubatch = fn("llama_n_ubatch", C.c_uint32, vp)
        self.llama_numa_init = fn("llama_numa_init", None, C.c_int)
        self.ggml_is_numa = fn("ggml_is_numa", C.c_bool)
        self.llama_get_memory = fn("llama_get_memory", vp, vp)
        self.llama_memory_seq_pos_max = fn("llama_memory_seq_pos_max", C.c_int32, vp, C.c_int32)
        self.llama_state_seq_load_file = fn("llama_state_seq_load_file", C.c_size_t, vp, C.c_char_p,
                                            C.c_int32, C.POINTER(C.c_int32), C.c_size_t,
                                            C.POINTER(C.c_size_t))
        self.llama_state_seq_save_file = fn("llama_state_seq_save_file", C.c_size_t, vp, C.c_char_p,
                                            C.c_int32, C.POINTER(C.c_int32), C.c_size_t)
        self.llama_state_save_file = fn("llama_state_save_file", C.c_bool, vp, C.c_char_p,
                                        C.POINTER(C.c_int32), C.c_size_t)
        self.llama_model_quantize = fn("llama_model_quantize", C.c_uint32, C.c_char_p, C.c_char_p,
                                       C.POINTER(LlamaModelQuantizeParams))
        self.ggml_backend_tensor_get = fn("ggml_backend_tensor_get", None, C.POINTER(GgmlTensor),
                                          vp, C.c_size_t, C.c_size_t)
        self.ggml_is_contiguous = fn("ggml_is_contiguous", C.c_bool, C.POINTER(GgmlTensor))
        self.ggml_nbytes = fn("ggml_nbytes", C.c_size_t, C.POINTER(GgmlTensor))
        self.ggml_get_name = fn("ggml_get_name", vp, C.POINTER(GgmlTensor))
        self.ggml_tensor_overhead = fn("ggml_tensor_overhead", C.c_size_t)
        self.ggml_type_name = fn("ggml_type_name", C.c_char_p, C.c_int)
        self.ggml_op_name = fn("ggml_op_name", C.c_char_p, C.c_int)
        overhead = self.ggml_tensor_overhead()
        if overhead - GGML_OBJECT_SIZE != C.sizeof(GgmlTensor):
            raise OracleError(f"ggml_tensor_overhead() = {overhead}: sizeof(ggml_tensor) is not "
                              f"{C.sizeof(GgmlTensor)} in this build")
        self.llama_backend_init()
        self._check_defaults()

    def cpu_features(self):
        """The CPU features ggml's CPU backend was built with and sees (`ggml_cpu_has_*`,
        and the SVE length in bytes), as `name` or `name=value` strings; empty where the
        backend does not export them (a dynamically loaded backend)."""
        out = []
        for name in CPU_FEATURES:
            f = getattr(self.lib, "ggml_cpu_has_" + name, None)
            if f is None:
                continue
            f.restype = C.c_int
            f.argtypes = []
            if f():
                out.append(name)
        cnt = getattr(self.lib, "ggml_cpu_get_sve_cnt", None)
        if cnt is not None:
            cnt.restype = C.c_int
            cnt.argtypes = []
            if cnt() > 0:
                out.append(f"sve_cnt={cnt()}")
        return out

    def _check_loaded_from_dir(self):
        """Every libllama/libggml* mapped into this process comes from lib_dir (no other
        tier's libggml-cpu.so sneaked in through the loader's SONAME matching)."""
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/lib" in line and ".so" in line}
        for p in paths:
            base = os.path.basename(p)
            if base.startswith(("libllama.so", "libggml")):
                if os.path.dirname(os.path.realpath(p)) != self.lib_dir:
                    raise OracleError(f"{base} was loaded from {p}, not from {self.lib_dir}")

    def _check_defaults(self):
        """A field shifted by a wrong mirror shows up as an odd default."""
        m = self.llama_model_default_params()
        c = self.llama_context_default_params()
        q = self.llama_model_quantize_default_params()
        bad = []
        if not (m.devices is None and m.kv_overrides is None and m.use_extra_bufts and
                not m.vocab_only and not m.no_alloc and m.main_gpu == 0):
            bad.append("llama_model_params")
        # llama_context_default_params() in src/llama-context.cpp of this tree.
        if not (c.n_ctx == 512 and c.n_batch == 2048 and c.n_ubatch == 512 and
                c.n_seq_max == 1 and c.n_outputs_max_per_seq == 1 and c.n_threads > 0 and
                c.flash_attn_type == -1 and c.yarn_ext_factor == -1.0 and
                c.yarn_attn_factor == -1.0 and c.defrag_thold == -1.0 and
                c.cb_eval_user_data is None and c.type_k == 1 and c.type_v == 1 and
                c.abort_callback is None and not c.embeddings and c.offload_kqv and
                c.swa_full and not c.kv_unified and c.samplers is None and
                c.n_samplers == 0 and c.ctx_other is None):
            bad.append("llama_context_params")
        # defaults: LLAMA_FTYPE_MOSTLY_Q8_0 (7), GGML_TYPE_COUNT (43) for "unset"
        if not (q.ftype == 7 and q.output_tensor_type == 43 and q.token_embedding_type == 43 and
                q.quantize_output_tensor and not q.dry_run and q.imatrix is None and
                q.prune_layers is None and q.max_buf_size > 0):
            bad.append("llama_model_quantize_params")
        if bad:
            raise OracleError("unexpected defaults from " + ", ".join(bad) +
                              ": the ctypes mirrors do not match this llama.h")

    def _on_log(self, level, text, _user):
        if level == 5:  # GGML_LOG_LEVEL_CONT: same level as the previous line
            level = self._last_level
        else:
            self._last_level = level
        s = text.decode("utf-8", "replace") if text else ""
        self.log_lines.append((level, s))
        if self.verbose or level >= 3:
            sys.stderr.write(s)

    def tensor_name(self, t):
        return t.contents.name.decode("utf-8", "replace")


def quantize(llama, src, dst, ftype, nthread=1):
    """llama_model_quantize(src -> dst) with the library's default parameters and `ftype`
    (e.g. 15 = LLAMA_FTYPE_MOSTLY_Q4_K_M); no importance matrix."""
    p = llama.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = nthread
    rc = llama.llama_model_quantize(os.fsencode(src), os.fsencode(dst), C.byref(p))
    if rc != 0:
        raise OracleError(f"llama_model_quantize({src} -> {dst}, ftype {ftype}) returned {rc}")


# ----------------------------------------------------------------------------- capture

class Capture:
    """The cb_eval callback: which nodes to ask for, and what they held."""

    def __init__(self, llama, n_layer, arch):
        self.llama = llama
        self.want = node_names(n_layer, arch)
        self.n_kv = set()
        self.reset()
        self.cb = EVAL_CB(self._cb)

    def reset(self):
        self.graphs = []    # finished graphs of the step: each tap -> (ne, array, op name)
        self.taps = {}      # the current graph's taps
        self.seen = {}      # tap -> how many nodes of that name were computed
        self.noncontig = set()
        self.error = None

    def step_graphs(self):
        """The graphs captured since reset(), in order."""
        return self.graphs + ([self.taps] if self.taps else [])

    def _cb(self, t, ask, _user):
        try:
            name = self.llama.tensor_name(t)
            if ask:
                if name.startswith("kq-"):
                    self.n_kv.add(int(t.contents.ne[0]))
                return name in self.want
            tap = self.want.get(name)
            if tap is None:
                return True
            self.seen[tap] = self.seen.get(tap, 0) + 1
            # The token-embedding node is the first of a graph: a new ubatch.
            if tap == "inp_embd" and self.taps:
                self.graphs.append(self.taps)
                self.taps = {}
            self.taps[tap] = self._read(t, name)
            return True
        except Exception as e:  # never let an exception unwind through C
            if self.error is None:
                self.error = e
            return False  # stops the graph compute; run() reports self.error

    def _read(self, t, name):
        tt = t.contents
        if tt.type not in (GGML_TYPE_F32, GGML_TYPE_I32):
            raise OracleError(f"node {name} is {self.llama.ggml_type_name(tt.type).decode()}, "
                              "taps must be F32 (or I32 indices)")
        ne = [int(x) for x in tt.ne]
        nb = [int(x) for x in tt.nb]
        count = int(np.prod(ne))
        if count == 0:
            out = np.empty(0, dtype=np.float32)
        elif self.llama.ggml_is_contiguous(t):
            out = np.empty(count, dtype=np.float32)
            self.llama.ggml_backend_tensor_get(t, out.ctypes.data, 0, count * 4)
        else:
            # Strided view: fetch the byte span it covers, then gather with its strides.
            self.noncontig.add(name)
            span = sum((n - 1) * s for n, s in zip(ne, nb)) + 4
            raw = np.empty((span + 3) // 4, dtype=np.float32)
            self.llama.ggml_backend_tensor_get(t, raw.ctypes.data, 0, span)
            view = np.lib.stride_tricks.as_strided(raw, shape=ne[::-1], strides=nb[::-1])
            out = np.ascontiguousarray(view).reshape(-1)
        if tt.type == GGML_TYPE_I32:
            out = out.view(np.int32).astype(np.float32)
        return ne, out, self.llama.ggml_op_name(tt.op).decode()


def to_rows(tap, ne, flat, rows):
    """ggml's ne is innermost first; the token dimension is the outermost non-trivial one.
    Returns the rows x width array."""
    if rows == 0:
        if flat.size:
            raise OracleError(f"tap {tap}: {flat.size} values where no row was expected (ne {ne})")
        # The width is what lies inside the (empty) token dimension: ne[0] for a row of
        # values, ne[0]*ne[1] for the per-expert rows of a mixture of experts.
        zero = next((i for i in range(4) if ne[i] == 0), 1)
        return flat.reshape(0, int(np.prod(ne[:zero])))
    if flat.size % rows:
        raise OracleError(f"tap {tap}: {flat.size} values do not split into {rows} rows (ne {ne})")
    if rows > 1:
        outer = max(i for i in range(4) if ne[i] > 1)
        if ne[outer] != rows:
            raise OracleError(f"tap {tap}: ne {ne} has no outermost token dimension of {rows}")
    return flat.reshape(rows, flat.size // rows)


# ----------------------------------------------------------------------------- run

def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Session:
    def __init__(self, llama, model_path, threads, repack, capture=True, kv="f32", fa=False,
                 gpu_layers=0, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX):
        self.llama = llama
        L = llama
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = gpu_layers
        mp.use_extra_bufts = bool(repack)
        self.model = L.llama_model_load_from_file(os.fsencode(model_path), mp)
        if not self.model:
            # llama.cpp's own reason was logged (warnings and errors go to stderr).
            raise OracleError(f"llama_model_load_from_file({model_path}) failed")
        self.n_layer = L.llama_model_n_layer(self.model)
        self.n_embd = L.llama_model_n_embd(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        buf = C.create_string_buffer(256)
        L.llama_model_desc(self.model, buf, 256)
        self.desc = buf.value.decode()
        self.arch = self.desc.split(" ")[0]
        self.capture = Capture(L, self.n_layer, self.arch) if capture else None
        cp = L.llama_context_default_params()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_ubatch
        cp.n_seq_max = 1
        cp.n_outputs_max = 0          # = n_batch: every row may be an output
        cp.n_outputs_max_per_seq = 0  # (only limits backend samplers; none here)
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED if fa else LLAMA_FLASH_ATTN_TYPE_DISABLED
        cp.type_k = KV_TYPES[kv]
        cp.type_v = KV_TYPES[kv]
        cp.embeddings = False
        cp.no_perf = True
        if self.capture is not None:
            cp.cb_eval = self.capture.cb
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            L.llama_model_free(self.model)
            raise OracleError("llama_init_from_model failed")
        self.n_past = 0
        self.n_ctx = n_ctx
        self.tokens = []  # the sequence's tokens: a loaded state's, then every id fed
        # The sizes llama.cpp runs with (it caps n_batch at n_ctx, n_ubatch at n_batch).
        self.n_batch = int(L.llama_n_batch(self.ctx))
        self.n_ubatch = int(L.llama_n_ubatch(self.ctx))
        if (self.n_batch, self.n_ubatch) != (min(n_batch, n_ctx), min(n_ubatch, n_batch, n_ctx)):
            raise OracleError(f"llama.cpp runs n_batch {self.n_batch}, n_ubatch {self.n_ubatch}, "
                              f"not the capped sizes of {n_batch}, {n_ubatch} in n_ctx {n_ctx}")

    def load_state(self, path):
        """Loads a sequence state file (llama_state_seq_save_file's format) into sequence
        0; the next ids continue after its cells. Returns the cell count."""
        L = self.llama
        cap = self.n_ctx
        toks = (C.c_int32 * cap)()
        n_tok = C.c_size_t(0)
        if L.llama_state_seq_load_file(self.ctx, os.fsencode(path), 0, toks, cap,
                                       C.byref(n_tok)) == 0:
            raise OracleError(f"loading the sequence state {path} failed")
        self.tokens = [int(toks[i]) for i in range(n_tok.value)]
        self.n_past = int(L.llama_memory_seq_pos_max(L.llama_get_memory(self.ctx), 0)) + 1
        return self.n_past

    def save_state(self, path, session=False):
        """Saves sequence 0's state (llama_state_seq_save_file), or with `session` the
        whole context's (llama_state_save_file, llama-completion's --prompt-cache), to `path`,
        written whole under a temporary name and renamed."""
        L = self.llama
        toks = (C.c_int32 * max(1, len(self.tokens)))(*self.tokens)
        tmp = path + ".tmp"
        if session:
            ok = L.llama_state_save_file(self.ctx, os.fsencode(tmp), toks, len(self.tokens))
        else:
            ok = L.llama_state_seq_save_file(self.ctx, os.fsencode(tmp), 0, toks,
                                             len(self.tokens)) != 0
        if not ok:
            raise OracleError(f"saving the {'session' if session else 'sequence state'} "
                              f"to {tmp} failed")
        os.replace(tmp, path)

    def close(self):
        if self.ctx:
            self.llama.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            self.llama.llama_model_free(self.model)
            self.model = None

    def decode(self, ids, logits_all=True):
        """One step: `ids` at the next positions, given to llama_decode in batches of
        n_batch, logits for every row (`logits_all`) or for the last one. Returns
        (positions, logits of the output rows x n_vocab, taps list or None, graphs' row
        counts, output rows)."""
        L = self.llama
        n = len(ids)
        if self.n_past + n > self.n_ctx:
            raise OracleError(f"positions {self.n_past}..{self.n_past + n - 1} exceed n_ctx {self.n_ctx}")
        for t in ids:
            if not 0 <= t < self.n_vocab:
                raise OracleError(f"token id {t} is outside the vocabulary (n_vocab {self.n_vocab})")
        outputs = list(range(n)) if logits_all else [n - 1]
        positions = list(range(self.n_past, self.n_past + n))
        if self.capture is not None:
            self.capture.reset()
        rows_out = []
        for off in range(0, n, self.n_batch):
            nb = min(self.n_batch, n - off)
            batch = L.llama_batch_init(nb, 0, 1)
            flagged = []
            try:
                for i in range(nb):
                    batch.token[i] = ids[off + i]
                    batch.pos[i] = positions[off + i]
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    out = (off + i) in outputs
                    batch.logits[i] = 1 if out else 0
                    if out:
                        flagged.append(i)
                batch.n_tokens = nb
                rc = L.llama_decode(self.ctx, batch)
                if self.capture is not None and self.capture.error is not None:
                    raise OracleError(f"eval callback failed: {self.capture.error!r}")
                if rc != 0:
                    raise OracleError(f"llama_decode returned {rc} at positions {positions[off]}..")
            finally:
                L.llama_batch_free(batch)
            for i in flagged:
                ptr = L.llama_get_logits_ith(self.ctx, i)
                if not ptr:
                    raise OracleError(f"llama_get_logits_ith({i}) returned NULL")
                rows_out.append(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy())
        self.n_past += n
        self.tokens += [int(t) for t in ids]
        logits = np.stack(rows_out).astype(np.float32)
        graphs = ubatches(n, self.n_batch, self.n_ubatch)
        taps = None
        if self.capture is not None:
            taps = assemble_taps(self.capture.step_graphs(), self.n_layer, graphs, outputs, logits,
                                 self.arch)
        return positions, logits, taps, graphs, outputs


def assemble_taps(graphs, n_layer, ubatch_rows, outputs, logits, arch):
    """The taps of one step in trace order, as rows x width arrays, from the graphs
    captured (each tap -> (ne, flat array, op name)), expected to be `ubatch_rows` rows
    each, with output rows `outputs` (indices into the step): every tap of each graph
    must be seen with the graph's rows (a pruned tap: its output rows; a pruned tap of a
    graph without an output row may be absent), the last node of each name must have the
    expected op, the graph's rows are appended in order, and result_output must be the
    logits."""
    names = [t for t in GLOBAL_TAPS[:1]]
    for il in range(n_layer):
        names += [f"{tap}-{il}" for tap in layer_taps(arch)]
    names += GLOBAL_TAPS[1:]
    if len(graphs) != len(ubatch_rows):
        raise OracleError(f"{len(graphs)} graphs computed, expected {len(ubatch_rows)} "
                          f"(ubatches of {ubatch_rows} rows)")
    parts = {t: [] for t in names}
    start = 0
    for gi, (captured, rows) in enumerate(zip(graphs, ubatch_rows)):
        n_out = sum(1 for r in outputs if start <= r < start + rows)
        missing = [t for t in names if t not in captured and
                   not (is_pruned(t, n_layer) and n_out == 0)]
        if missing:
            raise OracleError(f"graph {gi}: taps not seen: " + ", ".join(missing))
        embd_rows = captured["inp_embd"][0][1]
        if embd_rows != rows:
            raise OracleError(f"graph {gi} has {embd_rows} rows, expected a ubatch of {rows}")
        for t in names:
            if t not in captured:
                continue
            ne, flat, op = captured[t]
            want_op = EXPECTED_OP.get(t.rsplit("-", 1)[0])
            if want_op is not None and op != want_op:
                raise OracleError(f"tap {t}: the last node of that name is a {op}, not {want_op}")
            want_rows = n_out if is_pruned(t, n_layer) else rows
            parts[t].append(to_rows(t, ne, flat, want_rows))
        start += rows
    out = [(t, np.concatenate(parts[t], axis=0)) for t in names if parts[t]]
    res = dict(out).get("result_output")
    if res is None or res.shape != logits.shape or res.tobytes() != logits.tobytes():
        d = (np.abs(res.astype(np.float64) - logits)
             if res is not None and res.shape == logits.shape else None)
        raise OracleError(
            f"result_output {None if res is None else res.shape} differs from "
            f"llama_get_logits_ith {logits.shape}"
            + (f" (max |diff| {d.max():.3e})" if d is not None else ""))
    return out


def node_names(n_layer, arch):
    """llama.cpp node name -> trace tap name, for every tap of a model of n_layer layers of
    `arch` (None: every architecture's)."""
    want = {}
    kinds = LAYER_TAPS + MOE_LAYER_TAPS if arch is None else layer_taps(arch)
    for il in range(n_layer):
        for tap in kinds:
            want[f"{tap}-{il}"] = f"{tap}-{il}"
    for tap in GLOBAL_TAPS:
        if tap not in TAP_ALIASES.values():
            want[tap] = tap
    for node, tap in TAP_ALIASES.items():
        want[node] = tap
    return want


def step_record(i, positions, inp, logits, taps, graphs, outputs):
    """A step as trace_io.write_trace wants it."""
    nxt, top, gap = trace_io.pick(logits[-1])
    st = {"step": i, "positions": positions, "input_ids": [int(t) for t in inp],
          "emitted": nxt, "top": top, "gap": gap, "taps": taps or [], "logits": logits,
          "ubatches": graphs}
    if len(outputs) < len(inp):
        st["outputs"] = outputs
    return st


def run(llama, model_path, ids, mode, threads=2, repack=True, n_greedy=0, capture=True,
        kv="f32", fa=False, gpu_layers=0, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX,
        logits="all", state_in=None, state_out=None, session_out=None, numa=None):
    """Evaluates `ids` teacher-forced in `mode`, then `n_greedy` greedy steps, with a K/V
    cache of type `kv` and flash attention `fa`, in a context of `n_ctx` with batch and
    ubatch sizes `n_batch`, `n_ubatch`, the logits of every prompt row or (`last`) of its
    last; starting from the sequence state `state_in` (a file) when given, and saving
    the sequence's state to `state_out` after the last step when given. Returns (session
    info dict, steps) with steps as trace_io.write_trace wants them (`taps` empty when
    capture is False)."""
    numa_on = None
    if numa:
        # As llama-cli's --numa: before the model is loaded. ggml is NUMA-aware only where
        # it finds more than one node.
        llama.llama_numa_init(NUMA_STRATEGIES[numa])
        numa_on = bool(llama.ggml_is_numa())
    sess = Session(llama, model_path, threads, repack, capture, kv, fa, gpu_layers,
                   n_ctx, n_batch, n_ubatch)
    try:
        cells = sess.load_state(state_in) if state_in else 0
        if cells + len(ids) + n_greedy > n_ctx:
            raise OracleError(f"{cells} saved cells, {len(ids)} ids and {n_greedy} steps "
                              f"exceed n_ctx {n_ctx}")
        batches = [[t] for t in ids] if mode == "decode" else [list(ids)]
        steps = []
        nxt = None
        for i in range(len(batches) + n_greedy):
            inp = batches[i] if i < len(batches) else [nxt]
            every = logits == "all" or i >= len(batches)
            positions, lg, taps, graphs, outputs = sess.decode(inp, every)
            steps.append(step_record(i, positions, inp, lg, taps, graphs, outputs))
            nxt = steps[-1]["emitted"]
        if state_out:
            sess.save_state(state_out)
        if session_out:
            sess.save_state(session_out, session=True)
        info = {"numa_on": numa_on, "state_cells": cells, "n_layer": sess.n_layer, "n_embd": sess.n_embd, "n_vocab": sess.n_vocab,
                "desc": sess.desc, "n_batch": sess.n_batch, "n_ubatch": sess.n_ubatch,
                "n_kv": sorted(sess.capture.n_kv) if sess.capture else [],
                "noncontig": sorted(sess.capture.noncontig) if sess.capture else [],
                "seen": dict(sess.capture.seen) if sess.capture else {}}
        return info, steps
    finally:
        sess.close()


# ----------------------------------------------------------------------------- driver

MAX_LAYERS = 512  # captured node names are mapped to taps before the layer count is read


class Dump:
    """Reads the dump ci/oracle-driver/llamataps.c writes (format in its header)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.b = f.read()
        self.path = path
        self.i = 0
        if self.b[:6] != b"TCLT1\n":
            raise OracleError(f"{path}: not a llamataps dump")
        self.i = 6

    def take(self, n):
        if self.i + n > len(self.b):
            raise OracleError(f"{self.path}: truncated at byte {self.i}")
        v = self.b[self.i:self.i + n]
        self.i += n
        return v

    def u32(self):
        return int.from_bytes(self.take(4), "little")

    def i32(self):
        return int.from_bytes(self.take(4), "little", signed=True)

    def i64(self):
        return int.from_bytes(self.take(8), "little", signed=True)

    def str(self):
        return self.take(self.u32()).decode("utf-8", "replace")

    def f32(self, n):
        return np.frombuffer(self.take(4 * n), dtype="<f4").astype(np.float32)


def run_driver(driver, qemu_cpu, model_path, ids, mode, threads, repack, n_greedy, kv="f32",
               fa=False, n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX, logits="all",
               capture=True, state_in=None, state_out=None, numa=None):
    """Runs a llama.cpp driver (the aarch64 one under qemu-aarch64 with CPU model
    `qemu_cpu` unless this host is aarch64; with an empty `qemu_cpu`, directly: a driver
    built for this host) and returns (info, steps, repacked) as run() and main() build
    them in process."""
    import platform
    import subprocess
    import tempfile
    want = node_names(MAX_LAYERS, None)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "taps.dump")
        # The ids through a file: a long prompt exceeds the limit of one argument.
        ids_path = os.path.join(tmp, "ids.txt")
        with open(ids_path, "w") as f:
            f.write(",".join(str(i) for i in ids))
        cmd = [driver, model_path, mode, "@" + ids_path, str(threads),
               "1" if repack else "0", str(n_greedy), out, kv, "1" if fa else "0",
               str(n_ctx), str(n_batch), str(n_ubatch), logits,
               state_in or "-", state_out or "-"]
        globals_ = [n for n in node_names(0, None)]
        if capture:
            kinds = LAYER_TAPS + [t for t in MOE_LAYER_TAPS if t not in LAYER_TAPS]
            env = dict(os.environ, TAPS_LAYER=",".join(kinds),
                       TAPS_GLOBAL=",".join(globals_))
        else:
            env = dict(os.environ, TAPS_LAYER="-", TAPS_GLOBAL="-")
        env.pop("GGML_CPU_TILED_MM", None)
        env.pop("LLAMATAPS_NUMA", None)
        if numa:
            env["LLAMATAPS_NUMA"] = numa
        if qemu_cpu and platform.machine() != "aarch64":
            cmd = ["qemu-aarch64"] + cmd
            env["QEMU_CPU"] = qemu_cpu
        res = subprocess.run(cmd, env=env, capture_output=True)
        if res.returncode != 0:
            raise OracleError(f"{' '.join(cmd[:2])} exited {res.returncode}: "
                              + res.stderr.decode("utf-8", "replace")[-2000:])
        d = Dump(out)
        # The sizes llama.cpp runs with: n_batch capped at n_ctx, n_ubatch at n_batch.
        eff_batch = min(n_batch, n_ctx)
        eff_ubatch = min(n_ubatch, eff_batch)
        info = {"n_kv": set(), "noncontig": [], "seen": {}, "n_batch": eff_batch,
                "n_ubatch": eff_ubatch, "state_cells": 0, "numa_on": None}
        # The driver's view of the CPU (`llamataps info`: `name=0|1`, `sve_cnt=N` bytes).
        icmd = cmd[:-len(cmd) + (2 if cmd[0] == "qemu-aarch64" else 1)] + ["info"]
        ires = subprocess.run(icmd, env=env, capture_output=True)
        if ires.returncode != 0:
            raise OracleError(f"{' '.join(icmd)} exited {ires.returncode}: "
                              + ires.stderr.decode("utf-8", "replace")[-2000:])
        feats = []
        for kv_ in ires.stdout.decode().split():
            k, _, v = kv_.partition("=")
            if k == "sve_cnt" and v not in ("", "0"):
                feats.append(f"sve_cnt={v}")
            elif v == "1":
                feats.append({"i8mm": "matmul_int8"}.get(k, k))
        info["cpu_features"] = feats
        repacked = {}
        steps = []
        graphs, captured, seen, lrows = [], {}, {}, []
        while True:
            tag = d.take(1)
            if tag == b"E":
                break
            if tag == b"I":
                info["n_layer"], info["n_embd"], info["n_vocab"] = d.u32(), d.u32(), d.u32()
                info["desc"] = d.str()
            elif tag == b"K":
                info["n_kv"].add(d.u32())
            elif tag == b"N":
                info["numa_on"] = d.u32() == 1
            elif tag == b"P":
                info["state_cells"] = d.u32()
                d.u32()  # the state's token count
            elif tag == b"R":
                name = d.str()
                repacked[name] = d.str()
            elif tag == b"G":
                sys.stderr.write(d.str() + "\n")
            elif tag == b"T":
                node, op = d.str(), d.str()
                ne = [d.i64() for _ in range(4)]
                flat = d.f32(d.u32())
                tap = want.get(node)
                if tap is None:
                    raise OracleError(f"the driver captured {node}, which was not asked for")
                seen[tap] = seen.get(tap, 0) + 1
                # The token-embedding node is the first of a graph: a new ubatch.
                if tap == "inp_embd" and captured:
                    graphs.append(captured)
                    captured = {}
                captured[tap] = (ne, flat, op)
            elif tag == b"L":
                rows, n_vocab = d.u32(), d.u32()
                lrows.append(d.f32(rows * n_vocab).reshape(rows, n_vocab))
            elif tag == b"S":
                step, n = d.u32(), d.u32()
                pairs = [(d.i32(), d.i32()) for _ in range(n)]
                emitted = d.i32()
                n_prompt_steps = 1 if mode == "prompt" else len(ids)
                every = logits == "all" or step >= n_prompt_steps
                outputs = list(range(n)) if every else [n - 1]
                lg = np.concatenate(lrows, axis=0) if lrows else None
                if step != len(steps) or lg is None or lg.shape[0] != len(outputs):
                    raise OracleError(f"{out}: step {step} out of order or without its logits")
                if captured:
                    graphs.append(captured)
                rows_g = ubatches(n, eff_batch, eff_ubatch)
                taps = (assemble_taps(graphs, info["n_layer"], rows_g, outputs, lg,
                                      info["desc"].split(" ")[0])
                        if capture else [])
                st = step_record(step, [p for _, p in pairs], [t for t, _ in pairs], lg, taps,
                                 rows_g, outputs)
                if st["emitted"] != emitted:
                    raise OracleError(f"step {step}: the driver picked {emitted}, "
                                      f"argmax is {st['emitted']}")
                if step >= n_prompt_steps and st["input_ids"] != [steps[-1]["emitted"]]:
                    raise OracleError(f"step {step}: the driver fed {st['input_ids']}, not the "
                                      f"previous step's choice {steps[-1]['emitted']}")
                steps.append(st)
                for k, v in seen.items():
                    info["seen"][k] = info["seen"].get(k, 0) + v
                graphs, captured, seen, lrows = [], {}, {}, []
            else:
                raise OracleError(f"{out}: unknown record {tag!r} at byte {d.i - 1}")
        if d.i != len(d.b):
            raise OracleError(f"{out}: {len(d.b) - d.i} bytes after the end record")
        n_steps = (1 if mode == "prompt" else len(ids)) + n_greedy
        if len(steps) != n_steps:
            raise OracleError(f"{out}: {len(steps)} steps, expected {n_steps}")
    info["n_kv"] = sorted(info["n_kv"])
    return info, steps, repacked


def llama_cpp_python_lib():
    """The folder of the libllama inside the installed llama-cpp-python package."""
    import importlib.util
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("--llama-cpp-python: the llama_cpp package is not installed in this Python")
    for base in spec.submodule_search_locations:
        for sub in ("lib", ""):
            d = os.path.join(base, sub)
            if os.path.isfile(os.path.join(d, "libllama.so")):
                return d
    raise SystemExit("--llama-cpp-python: no libllama.so inside the llama_cpp package "
                     f"({', '.join(spec.submodule_search_locations)})")


def cli():
    """The console entry point."""
    sys.exit(main())


def parse_ids(s):
    try:
        ids = [int(x) for x in s.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise SystemExit(f"--ids: not a comma-separated list of integers: {s!r}")
    if not ids:
        raise SystemExit("--ids: empty")
    return ids


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="tiercheck-capture",
        description="Per-layer taps of a llama.cpp run as a tiercheck trace (docs/TRACES.md).")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--lib", help="a llama.cpp build folder with libllama.so, or the file itself")
    src.add_argument("--llama-cpp-python", action="store_true",
                     help="the libllama of the installed llama-cpp-python package")
    src.add_argument("--driver", help="an aarch64 llamataps driver (TIERCHECK_ORACLE_LLAMA_ARM_*), "
                                      "run under qemu-aarch64 with --qemu-cpu")
    ap.add_argument("--qemu-cpu", default="max,sve=off",
                    help="qemu CPU model for --driver (the tier's: neoverse-n1 for dotprod); "
                         "empty: run the driver directly (one built for this host)")
    ap.add_argument("--producer", default=None,
                    help="the trace's producer (default llama.cpp-haswell, or llama.cpp-aarch64)")
    ap.add_argument("--model", required=True, help="GGUF model file (qwen3)")
    ap.add_argument("--ids", required=True, help="comma-separated token ids, teacher-forced")
    ap.add_argument("--mode", required=True, choices=["decode", "prompt"])
    ap.add_argument("--out", required=True, help="trace file to write (.safetensors)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-repack", action="store_true", help="use_extra_bufts off: plain weights")
    ap.add_argument("--steps", type=int, default=0, help="greedy single-token steps after the ids")
    ap.add_argument("--kv", choices=sorted(KV_TYPES), default="f32",
                    help="K and V cache type (llama.cpp's default is f16)")
    ap.add_argument("--fa", choices=["on", "off"], default="off",
                    help="flash attention (llama.cpp's default resolves to on for the CPU)")
    ap.add_argument("--ctx", type=int, default=N_CTX,
                    help="context length, n_ctx (default 512; llama-cli's is 4096)")
    ap.add_argument("--batch", type=int, default=N_CTX,
                    help="ids per llama_decode of the prompt, n_batch (default 512; llama-cli's "
                         "is 2048); llama.cpp caps it at n_ctx")
    ap.add_argument("--ubatch", type=int, default=N_CTX,
                    help="rows per graph, n_ubatch (default 512, as llama-cli's); capped at "
                         "n_batch")
    ap.add_argument("--logits", choices=["all", "last"], default="all",
                    help="which prompt rows get logits: all (default, the perplexity tool's "
                         "way) or last (llama-cli's and llama-server's)")
    ap.add_argument("--state-in", default=None,
                    help="start from this sequence state file (llama_state_seq_save_file's "
                         "format, e.g. a llama-server slot save): the ids continue after its cells")
    ap.add_argument("--state-out", default=None,
                    help="save the sequence's state here after the last step "
                         "(llama_state_seq_save_file)")
    ap.add_argument("--session-out", default=None,
                    help="save the whole context as a session file after the last step "
                         "(llama_state_save_file, llama-completion's --prompt-cache; in process only)")
    ap.add_argument("--numa", choices=sorted(NUMA_STRATEGIES), default=None,
                    help="llama_numa_init with this strategy first, as llama-cli's --numa "
                         "(ggml is NUMA-aware only on a host with several NUMA nodes; the "
                         "trace records `numa` as the strategy, or `off` where ggml found one)")
    ap.add_argument("--no-taps", action="store_true",
                    help="capture no tap: the trace holds the steps and their choices only "
                         "(for a run that only fills a --state-out)")
    ap.add_argument("--gpu-layers", type=int, default=0,
                    help="layers offloaded to a GPU backend (llama.cpp's -ngl; 0: CPU only)")
    ap.add_argument("--verbose", action="store_true", help="pass llama.cpp's whole log to stderr")
    a = ap.parse_args(argv)
    if a.llama_cpp_python:
        a.lib = llama_cpp_python_lib()
    if a.gpu_layers < 0:
        raise SystemExit("--gpu-layers must be at least 0")
    if a.driver and a.gpu_layers:
        raise SystemExit("--gpu-layers: the aarch64 driver runs on the CPU only")
    fa = a.fa == "on"
    if a.ids.startswith("@"):
        try:
            with open(a.ids[1:]) as f:
                a.ids = f.read().strip()
        except OSError as e:
            raise SystemExit(f"--ids {a.ids}: {e}")
    ids = parse_ids(a.ids)
    if a.state_in and not os.path.isfile(a.state_in):
        raise SystemExit(f"--state-in {a.state_in}: no such file")
    if a.threads < 1:
        raise SystemExit("--threads must be at least 1")
    for name, v in (("--ctx", a.ctx), ("--batch", a.batch), ("--ubatch", a.ubatch)):
        if not 1 <= v <= MAX_CTX:
            raise SystemExit(f"{name} must be in 1..{MAX_CTX}, got {v}")
    n_rows = len(ids) + a.steps
    if n_rows > a.ctx:
        raise SystemExit(f"{len(ids)} ids and {a.steps} steps exceed --ctx {a.ctx}")
    if a.session_out and a.driver:
        raise SystemExit("--session-out: in process only (--lib)")
    if a.state_out and a.gpu_layers:
        raise SystemExit("--state-out: the state of a run with GPU layers is not checked here")
    try:
        if a.driver:
            info, steps, repacked = run_driver(a.driver, a.qemu_cpu, a.model, ids, a.mode,
                                               a.threads, not a.no_repack, a.steps, a.kv, fa,
                                               a.ctx, a.batch, a.ubatch, a.logits,
                                               not a.no_taps, a.state_in, a.state_out,
                                               a.numa)
        else:
            llama = Llama(a.lib, verbose=a.verbose)
            info, steps = run(llama, a.model, ids, a.mode, a.threads, not a.no_repack, a.steps,
                              capture=not a.no_taps, kv=a.kv, fa=fa, gpu_layers=a.gpu_layers,
                              n_ctx=a.ctx, n_batch=a.batch, n_ubatch=a.ubatch, logits=a.logits,
                              state_in=a.state_in, state_out=a.state_out,
                              session_out=a.session_out, numa=a.numa)
            info["cpu_features"] = llama.cpu_features()
            # ggml-cpu logs (debug level) "repack: repack tensor NAME with LAYOUT" per
            # repacked weight.
            repacked = {}
            for _, line in llama.log_lines:
                m = re.search(r"repack tensor (\S+) with (\S+)", line)
                if m:
                    repacked[m.group(1)] = m.group(2)
    except OracleError as e:
        print(f"tiercheck-capture: error: {e}", file=sys.stderr)
        return 1
    import platform
    under_qemu = bool(a.driver and a.qemu_cpu and platform.machine() != "aarch64")
    arch = "aarch64" if under_qemu else platform.machine()
    producer = a.producer or (f"llama.cpp-{arch}" if a.driver else PRODUCER)
    meta = {
        "producer": producer,
        "model_sha256": sha256_file(a.model),
        "mode": a.mode,
        "prompt_ids": json.dumps(ids, separators=(",", ":")),
        "repack": "off" if a.no_repack else "on",
        "threads": str(a.threads),
        "kv": a.kv,
        "fa": a.fa,
        "n_ctx": str(a.ctx),
        "n_batch": str(info["n_batch"]),
        "n_ubatch": str(info["n_ubatch"]),
        "logits": a.logits,
        "arch": arch,
        "llama.n_kv": json.dumps(info["n_kv"]),
        "llama.repacked": json.dumps(repacked, separators=(",", ":"), sort_keys=True),
    }
    if under_qemu:
        meta["qemu_cpu"] = a.qemu_cpu
    if a.state_in:
        meta["state_sha256"] = sha256_file(a.state_in)
        meta["state_cells"] = str(info["state_cells"])
        meta["state_path"] = os.path.abspath(a.state_in)
    if a.no_taps:
        meta["taps"] = "none"
    if a.numa:
        if not info["numa_on"]:
            print(f"tiercheck-capture: --numa {a.numa}: ggml found one NUMA node, so it ran "
                  "as without --numa (metadata numa = off)", file=sys.stderr)
        meta["numa"] = a.numa if info["numa_on"] else "off"
    if info.get("cpu_features") is not None:
        meta["cpu_features"] = ",".join(info["cpu_features"])
    if a.gpu_layers:
        meta["gpu_layers"] = str(a.gpu_layers)
    trace_io.write_trace(a.out, steps, meta)
    n_taps = sum(len(st["taps"]) for st in steps)
    print(f"tiercheck-capture: {info['desc']}, {info['n_layer']} layers, n_embd {info['n_embd']}, "
          f"n_vocab {info['n_vocab']}; {len(steps)} steps, {n_taps} taps -> {a.out}",
          file=sys.stderr)
    print(f"tiercheck-capture: attention n_kv {info['n_kv']}; non-contiguous taps: "
          f"{info['noncontig'] or 'none'}; repacked weights: {len(repacked)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
