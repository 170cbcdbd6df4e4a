#!/usr/bin/env python3
"""Record what ggml's own quantizer writes for the formats Loom's quantizer plugin implements, into
tests/data/quant-ggml.json: the exact bytes ggml_quantize_chunk (llama.cpp's quantize path, no
importance matrix) produces for a fixed set of rows. tests/unit/test_quant_golden.cpp quantizes the
same rows with the plugin and requires the same bytes.

ggml comes from the llama-cpp-python wheel (pip install llama-cpp-python==0.3.36), called through
ctypes. The rows: N(0,1), small values with outliers, all positive (the min-offset formats' case),
and one with all-zero sub-blocks and a zero half super-block.

usage: python3 scripts/make_quant_golden.py [--out tests/data/quant-ggml.json]
"""
import argparse
import ctypes
import json
import os

import numpy as np

# ggml_type ids (ggml.h); the same numbers as LOOM_DTYPE_*.
TYPES = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13,
         "Q6_K": 14, "IQ4_NL": 20, "IQ4_XS": 23, "MXFP4": 39}
N_PER_ROW = 512


def ggml_library():
    import llama_cpp
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_quantize_init.argtypes = [ctypes.c_int]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    return lib


def rows():
    rng = np.random.default_rng(2026)
    normal = rng.standard_normal(N_PER_ROW)
    small = rng.standard_normal(N_PER_ROW) * 0.02
    small[rng.integers(0, N_PER_ROW, 6)] *= 40  # outliers
    positive = rng.uniform(0.1, 3.0, N_PER_ROW)
    sparse = rng.standard_normal(N_PER_ROW) * 0.5
    sparse[32:64] = 0.0     # a zero block of 32 (and sub-blocks of 16)
    sparse[256:384] = 0.0   # half of a super-block
    return np.stack([normal, small, positive, sparse]).astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(root, "tests", "data", "quant-ggml.json"))
    args = parser.parse_args()
    lib = ggml_library()
    x = np.ascontiguousarray(rows())
    out = {"generator": "scripts/make_quant_golden.py (ggml_quantize_chunk from llama-cpp-python 0.3.36)",
           "n_rows": int(x.shape[0]), "n_per_row": N_PER_ROW, "input_f32_le": x.tobytes().hex(), "types": {}}
    for name, ggml_type in TYPES.items():
        lib.ggml_quantize_init(ggml_type)
        size = lib.ggml_row_size(ggml_type, N_PER_ROW) * x.shape[0]
        dst = (ctypes.c_uint8 * size)()
        written = lib.ggml_quantize_chunk(ggml_type, x.ctypes.data, ctypes.addressof(dst), 0, x.shape[0], N_PER_ROW, None)
        assert written == size, (name, written, size)
        out["types"][name] = bytes(dst).hex()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
