#!/usr/bin/env python3
"""`loom quantize --type Q4_K_M` (and every other llama.cpp mix Loom names) writes the file
llama-quantize writes: for synthetic F16 models, quantized by Loom and by llama.cpp (llama-cpp-python's
llama_model_quantize, same ftype, no importance matrix), every tensor has the same type and the same
bytes. Models: 16 layers with 4 query heads per KV head (the attn_v rules that read n_gqa), 8 layers
with 2, and one whose rows (320) K-quant blocks do not divide (llama.cpp's fallbacks).
Exit 0 on success, 1 on a mismatch, 77 (skip) without llama-cpp-python or gguf-py."""
import argparse
import os
import subprocess
import sys
import tempfile

MIXES = {"Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15, "Q5_K_S": 16, "Q5_K_M": 17}
MODELS = {"l16-gqa4": ["--layers", "16", "--dim", "256", "--heads", "8", "--kv-heads", "2", "--ff", "512"],
          "l8-gqa2": ["--layers", "8", "--dim", "256", "--heads", "4", "--kv-heads", "2", "--ff", "768"],
          "l4-dim320": ["--layers", "4", "--dim", "320", "--heads", "5", "--kv-heads", "5", "--ff", "640"]}
LLAMA_QUANTIZE = """
import ctypes, sys, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = int(sys.argv[3]); p.nthread = 1
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(p)))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", required=True)
    args = ap.parse_args()
    try:
        import llama_cpp  # noqa: F401
        from gguf import GGUFReader
    except ImportError as e:
        print(f"SKIP: {e.name} is not installed (scripts/setup.sh installs llama-cpp-python and gguf)")
        return 77
    failures, compared = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, shape in MODELS.items():
            src = os.path.join(tmp, label + "-f16.gguf")
            subprocess.run([args.loom, "gguf", "synth", "--arch", "llama", *shape, "--vocab", "512", "--type", "F16",
                            "--seed", "11", "-o", src], check=True, stdout=subprocess.DEVNULL)
            for mix, ftype in MIXES.items():
                ours, theirs = os.path.join(tmp, f"{label}-{mix}-loom.gguf"), os.path.join(tmp, f"{label}-{mix}-llama.gguf")
                subprocess.run([args.loom, "quantize", src, ours, "--type", mix, "--quiet"], check=True, stdout=subprocess.DEVNULL)
                p = subprocess.run([sys.executable, "-c", LLAMA_QUANTIZE, src, theirs, str(ftype)], capture_output=True, text=True)
                if p.returncode != 0:
                    failures.append(f"{label} {mix}: llama_model_quantize failed: {p.stderr[-400:]}")
                    continue
                a = {t.name: t for t in GGUFReader(theirs).tensors}
                b = {t.name: t for t in GGUFReader(ours).tensors}
                if set(a) != set(b):
                    failures.append(f"{label} {mix}: tensor names differ")
                    continue
                types = {}
                for name, t in a.items():
                    u = b[name]
                    compared += 1
                    if t.tensor_type != u.tensor_type:
                        failures.append(f"{label} {mix} {name}: llama.cpp {t.tensor_type.name}, Loom {u.tensor_type.name}")
                    elif t.data.tobytes() != u.data.tobytes():
                        failures.append(f"{label} {mix} {name}: {t.tensor_type.name} bytes differ")
                    types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
                print(f"{label} {mix}: {len(a)} tensors, types {dict(sorted(types.items()))}")
    for f in failures[:40]:
        print("FAIL:", f)
    print(f"{compared} tensors compared, {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
