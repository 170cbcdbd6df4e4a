#!/usr/bin/env python3
"""Record reference decodings of the GGUF block formats the CPU backend decodes row by row (Q4_1, Q5_1,
Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS) into tests/data/dequant-gguf-py.json.

The decoder is gguf-py's (`pip install gguf`: ggml's own Python package, an implementation independent
of Loom's C++): random blocks, with their f16 scale fields set to finite values, and what gguf-py
decodes them to. tests/unit/test_dequant_golden.cpp runs the same bytes through the CPU backend's
GET_ROWS (reference and fast kernels) and compares.

usage: python3 scripts/make_dequant_golden.py [--out tests/data/dequant-gguf-py.json]
"""
import argparse
import json
import os

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize

# The f16 fields of each block (byte offsets): random bits there could be inf or NaN.
HALF_OFFSETS = {T.Q4_1: [0, 2], T.Q5_1: [0, 2], T.Q2_K: [80, 82], T.Q3_K: [108], T.Q5_K: [0, 2], T.IQ4_NL: [0],
                T.IQ4_XS: [0]}
N_BLOCKS = 3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(root, "tests", "data", "dequant-gguf-py.json"))
    args = parser.parse_args()
    rng = np.random.default_rng(18)
    out = {"generator": "scripts/make_dequant_golden.py (gguf-py %s)" % __import__("gguf").__version__
           if hasattr(__import__("gguf"), "__version__") else "scripts/make_dequant_golden.py (gguf-py)", "types": {}}
    for qtype, halves in HALF_OFFSETS.items():
        elems, size = GGML_QUANT_SIZES[qtype]
        blocks = rng.integers(0, 256, size=(N_BLOCKS, size), dtype=np.uint8)
        for b in range(N_BLOCKS):
            for off in halves:
                scale = np.float16(rng.uniform(-0.05, 0.05))
                blocks[b, off:off + 2] = np.frombuffer(scale.tobytes(), dtype=np.uint8)
        values = dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == N_BLOCKS * elems
        out["types"][qtype.name] = {"block_elems": elems, "bytes_hex": blocks.tobytes().hex(),
                                     "values": [float(v) for v in values]}
    with open(args.out, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
