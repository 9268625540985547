#!/usr/bin/env python3
# trace_io.py: read and write tiercheck trace files (docs/TRACES.md) with numpy alone.
#
# A trace is a standard safetensors file, written here by hand because the oracle venv
# has no `safetensors` package:
#   - 8 bytes: little-endian u64 N, the length of the JSON header;
#   - N bytes: a UTF-8 JSON object; "__metadata__" maps strings to strings, and every other
#     key is a tensor name mapping to {"dtype", "shape", "data_offsets": [begin, end]},
#     offsets relative to the first byte after the header; padded with spaces to a
#     multiple of 8 so the data starts aligned (the safetensors convention);
#   - the raw tensor bytes, little-endian, row-major, in header order, back to back.
# Trace tensors are all F32, 2-D (rows x width), named `NNN/TAP` (NNN = step, 3 digits).
# The metadata holds `tiercheck.format` = `trace-1`, `tiercheck.steps` (a JSON array, one
# object per step: step, positions, input_ids, emitted, top, gap, and where known
# `ubatches`, the row counts of the graphs the step ran as, and `outputs`, the output rows
# when not every row is one: a pruned tap holds those rows only) and provenance keys.
#
# Used by tiercheck-capture (`tiercheck_capture.capture`); importable by any script as
# `tiercheck_capture.trace_io`. Also a small command-line tool:
#   python -m tiercheck_capture.trace_io show TRACE            metadata and tensor list
#   python -m tiercheck_capture.trace_io diff A B [--tol REL]  per tap: max |a-b|, relative
#                                     to max |b|, and whether the two are bitwise equal
import json
import os
import struct
import sys

import numpy as np

TRACE_FORMAT = "trace-1"

# safetensors dtype names for the numpy dtypes this module reads (it writes F32 only).
_DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "F16": np.dtype("<f2"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
    "U8": np.dtype("u1"),
}


class TraceError(Exception):
    pass


def write_safetensors(path, tensors, metadata):
    """Writes `tensors` (an iterable of (name, 2-D float32 array), kept in that order) and
    the string-to-string `metadata` to `path` atomically (temporary file + rename)."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs = []
    off = 0
    for name, a in tensors:
        a = np.ascontiguousarray(a, dtype="<f4")
        if name in header:
            raise TraceError(f"duplicate tensor name {name!r}")
        header[name] = {
            "dtype": "F32",
            "shape": [int(s) for s in a.shape],
            "data_offsets": [off, off + a.nbytes],
        }
        off += a.nbytes
        blobs.append(a)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for a in blobs:
            f.write(a.tobytes())
    os.replace(tmp, path)


def read_safetensors(path):
    """Returns (tensors, metadata): a dict name -> numpy array (in file order) and the
    `__metadata__` dict (empty when absent)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise TraceError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise TraceError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        dt = _DTYPES.get(info["dtype"])
        if dt is None:
            raise TraceError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
        b, e = info["data_offsets"]
        shape = tuple(int(s) for s in info["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if e - b != count * dt.itemsize or base + e > len(raw):
            raise TraceError(f"{path}: tensor {name!r} has inconsistent offsets {b}..{e}")
        tensors[name] = np.frombuffer(raw, dtype=dt, count=count, offset=base + b).reshape(shape)
    return tensors, metadata


def pick(logits):
    """Greedy token of one logits row (argmax, ties to the lowest id), the five best as
    [id, logit] pairs (best first, ties to the lowest id) and the gap top1 - top2 (computed in
    float64 from the row's own values)."""
    logits = np.asarray(logits)
    order = np.lexsort((np.arange(logits.shape[0]), -logits.astype(np.float64)))
    top = [[int(i), float(logits[i])] for i in order[:5]]
    gap = (float(np.float64(logits[order[0]]) - np.float64(logits[order[1]]))
           if logits.shape[0] > 1 else float("inf"))
    return int(order[0]), top, gap


def write_trace(path, steps, metadata):
    """`steps`: list of dicts with step, positions, input_ids, emitted, top, gap and `taps`
    (a list of (TAP, 2-D array) in the order they should be stored). `metadata`: provenance
    keys (producer, model_sha256, mode, prompt_ids, ...); the format and steps keys are
    added here."""
    if len(steps) > 1000:
        raise TraceError(f"{len(steps)} steps: tensor names NNN/TAP allow at most 1000")
    tensors = []
    for st in steps:
        for tap, a in st["taps"]:
            a = np.asarray(a)
            if a.ndim != 2:
                raise TraceError(f"step {st['step']} tap {tap}: {a.ndim}-D, traces hold rows x width")
            tensors.append((f"{st['step']:03d}/{tap}", a))
    keys = ("step", "positions", "input_ids", "emitted", "top", "gap", "ubatches", "outputs")
    meta_steps = [{k: st[k] for k in keys if k in st} for st in steps]
    meta = dict(metadata)
    meta["tiercheck.format"] = TRACE_FORMAT
    meta["tiercheck.steps"] = json.dumps(meta_steps, separators=(",", ":"))
    write_safetensors(path, tensors, meta)


def read_trace(path):
    """Returns (metadata, steps, taps): the metadata dict, the parsed `tiercheck.steps`
    list, and a dict step -> {TAP: array} (taps in file order)."""
    tensors, metadata = read_safetensors(path)
    if metadata.get("tiercheck.format") != TRACE_FORMAT:
        raise TraceError(f"{path}: tiercheck.format is {metadata.get('tiercheck.format')!r}, "
                         f"expected {TRACE_FORMAT!r}")
    steps = json.loads(metadata.get("tiercheck.steps", "[]"))
    taps = {}
    for name, a in tensors.items():
        s, sep, tap = name.partition("/")
        if not sep or len(s) != 3 or not s.isdigit():
            raise TraceError(f"{path}: tensor name {name!r} is not NNN/TAP")
        taps.setdefault(int(s), {})[tap] = a
    return metadata, steps, taps


def _main(argv):
    if len(argv) >= 2 and argv[0] == "show":
        meta, steps, taps = read_trace(argv[1])
        for k in sorted(meta):
            if k != "tiercheck.steps":
                print(f"{k} = {meta[k]}")
        for st in steps:
            print(f"step {st['step']}: positions {st['positions'][0]}..{st['positions'][-1]} "
                  f"emitted {st['emitted']} gap {st['gap']:.6g} top {st['top'][:3]}")
            for tap, a in taps.get(st["step"], {}).items():
                print(f"    {tap:<16} {a.shape[0]} x {a.shape[1]}")
        return 0
    if len(argv) >= 3 and argv[0] == "diff":
        tol = float(argv[argv.index("--tol") + 1]) if "--tol" in argv else None
        _, _, ta = read_trace(argv[1])
        _, _, tb = read_trace(argv[2])
        bad = 0
        for s in sorted(set(ta) | set(tb)):
            for tap in list(ta.get(s, {})) + [t for t in tb.get(s, {}) if t not in ta.get(s, {})]:
                a, b = ta.get(s, {}).get(tap), tb.get(s, {}).get(tap)
                if a is None or b is None or a.shape != b.shape:
                    print(f"{s:03d}/{tap}: only in one trace or shapes differ")
                    bad += 1
                    continue
                d = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
                ref = float(np.max(np.abs(b))) if b.size else 0.0
                rel = d / ref if ref > 0 else d
                same = a.tobytes() == b.tobytes()
                flag = "" if tol is None or rel <= tol else "  FAIL"
                bad += bool(flag)
                print(f"{s:03d}/{tap:<16} max|diff| {d:.3e} rel {rel:.3e} "
                      f"{'bitwise-equal' if same else ''}{flag}")
        return 1 if bad else 0
    print("usage: python -m tiercheck_capture.trace_io show TRACE | diff A B [--tol REL]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
