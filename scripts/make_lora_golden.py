#!/usr/bin/env python3
"""Record llama.cpp's log-probabilities with LoRA adapters applied, for Loom's adapter tests (issue 39).

For each case: a synthetic model (`loom gguf synth`) and a synthetic adapter of it (`loom gguf synth-lora`,
llama.cpp's GGUF adapter layout), both seeded, so the test regenerates the same files bit for bit (their
FNV-1a hashes are recorded); then llama.cpp (scripts/reference/logits_reference.cpp built against the
vendored tree, CPU, 2 threads, F16 KV) applies the adapter at the recorded scale and gives the 20 most
likely next tokens after a prompt of ids, and 8 greedy tokens. Writes tests/golden/lora/<name>.json.

usage: make_lora_golden.py --llama-cpp TREE [--loom build/bin/loom] [--out tests/golden/lora]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from check_convert_with_llama_cpp import build_reference  # noqa: E402
from golden_hash import file_fnv1a64  # noqa: E402

PROMPT = [1, 5, 17, 99, 240, 3, 77, 41, 42, 43, 300, 12]
# Two families (a llama with interleaved rope pairs; a qwen3 with q/k norms and its own head size),
# ranks 8 and 64, F32 and F16 adapter values, scales 1 and 0.5, all seven projections or a few.
CASES = [
    {"name": "llama-rank8", "model": {"arch": "llama", "layers": 2, "dim": 128, "heads": 4, "kv_heads": 2, "head_dim": 32,
                                      "ff": 256, "vocab": 512, "ctx": 256, "seed": 11, "type": "F32"},
     "adapter": {"rank": 8, "alpha": 16, "type": "F32", "seed": 21, "targets": "q,k,v,o,gate,up,down", "scale": 1.0}},
    {"name": "qwen3-rank64", "model": {"arch": "qwen3", "layers": 2, "dim": 128, "heads": 4, "kv_heads": 2, "head_dim": 48,
                                       "ff": 256, "vocab": 512, "ctx": 256, "seed": 12, "type": "F16"},
     "adapter": {"rank": 64, "alpha": 32, "type": "F16", "seed": 22, "targets": "q,v,o,down", "scale": 0.5}},
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--loom", default=os.path.join(ROOT, "build", "bin", "loom"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "golden", "lora"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="loom-lora-golden-")
    reference = build_reference(args.llama_cpp, work)
    os.makedirs(args.out, exist_ok=True)
    for case in CASES:
        m, a = case["model"], case["adapter"]
        model, adapter = os.path.join(work, case["name"] + ".gguf"), os.path.join(work, case["name"] + "-lora.gguf")
        subprocess.run([args.loom, "gguf", "synth", "--arch", m["arch"], "--layers", str(m["layers"]), "--dim", str(m["dim"]),
                        "--heads", str(m["heads"]), "--kv-heads", str(m["kv_heads"]), "--head-dim", str(m["head_dim"]),
                        "--ff", str(m["ff"]), "--vocab", str(m["vocab"]), "--ctx", str(m["ctx"]), "--seed", str(m["seed"]),
                        "--type", m["type"], "-o", model], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([args.loom, "gguf", "synth-lora", "--model", model, "--rank", str(a["rank"]), "--alpha", str(a["alpha"]),
                        "--type", a["type"], "--seed", str(a["seed"]), "--targets", a["targets"], "-o", adapter],
                       check=True, stdout=subprocess.DEVNULL)
        base = json.loads(subprocess.run([reference, model, *map(str, PROMPT)], check=True, capture_output=True, text=True).stdout)
        adapted = json.loads(subprocess.run([reference, model, "--lora", adapter, str(a["scale"]), *map(str, PROMPT)], check=True,
                                            capture_output=True, text=True).stdout)
        golden = {"model": {"spec": m, "fnv1a64": file_fnv1a64(model)},
                  "adapter": dict(a, fnv1a64=file_fnv1a64(adapter)),
                  "prompt": PROMPT, "top": adapted["top"], "greedy": adapted["greedy"], "base_top": base["top"]}
        path = os.path.join(args.out, case["name"] + ".json")
        with open(path, "w") as f:
            json.dump(golden, f, indent=1)
        moved = max(abs(x[1] - y[1]) for x, y in zip(adapted["top"], base["top"]))
        print(f"{path}: top-1 {adapted['top'][0]}, base top-1 {base['top'][0]}, adapter moves the top log-probs by up to {moved:.3f}")


if __name__ == "__main__":
    main()
