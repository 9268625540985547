#!/usr/bin/env python3
"""Quantize a GGUF model with llama.cpp's own `llama_model_quantize` (the library's default
parameters, no importance matrix, the given `llama_ftype`), loaded from one llama.cpp build
folder through the capture tool's ctypes mirrors (`tools/capture` on PYTHONPATH). Used by
tiercheck's oracle tests to check `tiercheck gguf quantize` against llama-quantize."""
import sys

from tiercheck_capture.capture import Llama, OracleError, quantize


def main() -> int:
    if len(sys.argv) != 5:
        print("usage: llama_quantize.py LIB_DIR SRC.gguf DST.gguf FTYPE", file=sys.stderr)
        return 2
    lib, src, dst, ftype = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    try:
        llama = Llama(lib)
        quantize(llama, src, dst, int(ftype), nthread=2)
    except (OracleError, ValueError) as e:
        print(f"llama_quantize.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
