"""Write one plain dump in the ways engines save numpy archives (the npz fuzz seeds and
the import test's cases, fuzz/corpus/npz/).

    npz_variants.py TRACE.safetensors OUT_DIR

TRACE: a tiercheck trace of two decode steps (`tiercheck run --lane ref --teacher-force
17,2045 --mode decode --out TRACE`). Its `attn_norm-0` and `result_output` rows become:

- plain.npz: `numpy.savez`, little-endian C-order float32, `ids` int64 (the reference);
- logits.npz: the logits as `logits`, the ids as `tokens`;
- input_ids.npz: the ids as `input_ids` (int32);
- compressed.npz: `numpy.savez_compressed`;
- big_endian.npz: every array big-endian (`>f4`, `>i8`);
- fortran.npz: every 2-D array in Fortran order;
- extra.npz: plus arrays that are no taps (an engine's own: float64, a 3-D one).

Needs numpy (the oracle venv has it) and the capture tool's trace reader
(tools/capture on PYTHONPATH).
"""
import os
import sys

import numpy as np

from tiercheck_capture import trace_io


def main(trace, out):
    _, steps, taps = trace_io.read_trace(trace)
    rows = {}
    for name in ("attn_norm-0", "result_output"):
        rows[name] = np.concatenate([taps[s["step"]][name] for s in steps]).astype("<f4")
    ids = np.array([s["input_ids"][0] for s in steps], dtype="<i8")
    os.makedirs(out, exist_ok=True)
    base = {"attn_norm-0": rows["attn_norm-0"], "result_output": rows["result_output"]}
    np.savez(os.path.join(out, "plain.npz"), ids=ids, **base)
    np.savez(os.path.join(out, "logits.npz"), tokens=ids, logits=rows["result_output"],
             **{"attn_norm-0": rows["attn_norm-0"]})
    np.savez(os.path.join(out, "input_ids.npz"), input_ids=ids.astype("<i4"), **base)
    np.savez_compressed(os.path.join(out, "compressed.npz"), ids=ids, **base)
    np.savez(os.path.join(out, "big_endian.npz"), ids=ids.astype(">i8"),
             **{k: v.astype(">f4") for k, v in base.items()})
    np.savez(os.path.join(out, "fortran.npz"), ids=ids,
             **{k: np.asfortranarray(v) for k, v in base.items()})
    np.savez(os.path.join(out, "extra.npz"), ids=ids, rope_cache=np.ones((2, 3, 4)),
             engine_scale=np.float64(0.5), **base)


if __name__ == "__main__":
    main(*sys.argv[1:])
