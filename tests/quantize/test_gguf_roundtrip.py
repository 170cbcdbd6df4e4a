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


# Evaluated in a child process: a crash inside llama.cpp must not take the test down with it.
CHECK_SCRIPT = r"""
import math, sys
import llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, n_threads=2, logits_all=False, verbose=False)
llm.eval([1, 40, 41, 42])
sys.exit(0 if all(math.isfinite(float(v)) for v in llm.scores[llm.n_tokens - 1]) else 3)
"""

# llama.cpp re-quantizes the same F32 source to `qtype` with its own quantizer.
QUANTIZE_SCRIPT = r"""
import ctypes, sys
import llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = int(sys.argv[3])
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), ctypes.byref(params)))
"""

# general.file_type (llama_ftype) of a file whose matrices are all `qtype`.
FTYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K": 12, "Q4_K": 15, "Q5_K": 17,
          "Q6_K": 18, "IQ4_NL": 25, "IQ4_XS": 30}


def llama_cpp_available():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


def llama_cpp_eval(path):
    """'finite', 'non-finite' or 'crashed (signal N)': llama.cpp loading the file and evaluating 4 tokens."""
    p = subprocess.run([sys.executable, "-c", CHECK_SCRIPT, path], capture_output=True, text=True, timeout=300)
    if p.returncode == 0:
        return "finite"
    if p.returncode == 3:
        return "non-finite"
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    return "crashed (status %d%s)" % (p.returncode, ": " + last if last else "")


def llama_cpp_check(path, src, qtype, tmp):
    """None without llama-cpp-python; else (ok, what happened). A crash counts against Loom's file only
    when llama.cpp evaluates its own quantization of the same source to the same type."""
    if not llama_cpp_available():
        return None, "skipped (llama-cpp-python not installed)"
    verdict = llama_cpp_eval(path)
    if verdict == "finite":
        return True, "loaded it, finite logits"
    if verdict.startswith("crashed"):
        own = os.path.join(tmp, qtype + "-llama.gguf")
        q = subprocess.run([sys.executable, "-c", QUANTIZE_SCRIPT, src, own, str(FTYPES[qtype])], capture_output=True, timeout=300)
        if q.returncode == 0 and llama_cpp_eval(own).startswith("crashed"):
            return None, "%s, as on its own %s quantization of the same model (a llama.cpp build problem, not the file)" % (verdict, qtype)
    return False, verdict


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
            loaded, what = llama_cpp_check(q, src, qtype, tmp)
            verdict = "ok" if not mismatched and n_typed > 0 and loaded is not False else "FAIL"
            print("%-7s %d tensors of the type; gguf-py decodes %s; llama.cpp %s  %s" % (
                qtype, n_typed, "every tensor as Loom does" if not mismatched else "differently: " + ", ".join(mismatched),
                what, verdict))
            if verdict != "ok":
                failures.append(qtype)
    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
