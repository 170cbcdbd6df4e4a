#!/usr/bin/env python3
"""`loom quantize` writes files llama.cpp reads as Loom does: for every GGML type the quantizer plugin
writes, a synthetic F32 model is quantized (embeddings included), then
  - gguf-py (ggml's own Python reader and decoders) decodes every tensor of the file to exactly the
    values Loom decodes it to (`loom quantize --type F32` of the same file), and
  - llama.cpp (llama-cpp-python, when installed) loads the file and evaluates a prompt to finite logits.
Exit 0 on success, 1 on a failure, 77 (skip) without gguf-py.
"""
import argparse
import os
import subprocess
import sys
import tempfile

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))


def llama_cpp_check(path):
    """Loads the file in llama.cpp and evaluates a few tokens; returns None when llama-cpp-python is absent."""
    try:
        import llama_cpp
    except ImportError:
        return None
    import math
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_threads=2, logits_all=False, verbose=False)
    llm.eval([1, 40, 41, 42])
    logits = llm.scores[llm.n_tokens - 1]
    return all(math.isfinite(float(v)) for v in logits)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    args = parser.parse_args()
    try:
        import numpy as np
        from gguf import GGUFReader
        from gguf.quants import dequantize
    except ImportError:
        print("SKIP: gguf-py (pip install gguf) is not installed; scripts/setup.sh installs it")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "f32.gguf")
        run([args.loom, "gguf", "synth", "--arch", "llama", "--layers", "1", "--dim", "256", "--heads", "4",
             "--kv-heads", "2", "--ff", "512", "--vocab", "512", "--type", "F32", "--seed", "5", "-o", src])
        for qtype in TYPES:
            q = os.path.join(tmp, qtype + ".gguf")
            back = os.path.join(tmp, qtype + "-f32.gguf")
            run([args.loom, "quantize", src, q, "--type", qtype, "--keep-embeddings", "same", "--quiet"])
            run([args.loom, "quantize", q, back, "--type", "F32", "--quiet"])
            loom_values = {t.name: np.array(t.data, dtype=np.float32).reshape(-1) for t in GGUFReader(back).tensors}
            n_typed, mismatched = 0, []
            for t in GGUFReader(q).tensors:
                values = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
                if t.tensor_type.name == qtype:
                    n_typed += 1
                if not np.array_equal(values, loom_values[t.name]):
                    mismatched.append(t.name)
            loaded = llama_cpp_check(q)
            verdict = "ok" if not mismatched and n_typed > 0 and loaded is not False else "FAIL"
            print("%-7s %d tensors of the type; gguf-py decodes %s; llama.cpp %s  %s" % (
                qtype, n_typed, "every tensor as Loom does" if not mismatched else "differently: " + ", ".join(mismatched),
                "skipped (llama-cpp-python not installed)" if loaded is None else
                ("loaded it, finite logits" if loaded else "gave non-finite logits"), verdict))
            if verdict != "ok":
                failures.append(qtype)
    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
