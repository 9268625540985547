#!/usr/bin/env python3
"""Dequantize every tensor of a GGUF file with gguf-py (llama.cpp's own Python reader and
numpy codecs), writing <OUTDIR>/<index>.f32 as little-endian float32 plus index.txt with
"<index> <name> <type>" lines. Used by tiercheck's oracle tests as an independent
implementation of the block formats."""
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: gguf_dequant.py FILE.gguf OUTDIR", file=sys.stderr)
        return 2
    path, out = sys.argv[1], sys.argv[2]
    reader = GGUFReader(path)
    lines = []
    for i, t in enumerate(reader.tensors):
        values = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        values.astype("<f4").tofile(os.path.join(out, f"{i}.f32"))
        lines.append(f"{i} {t.name} {t.tensor_type.name}")
    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
