#!/usr/bin/env python3
"""Image encoding against llama.cpp's mtmd on the same files, in the same run (issue 36's target: encode
at least 1.5x faster on 2 threads).

Alternates `loom bench --image` and `llama-mtmd-cli` (built from the vendored llama.cpp: cmake --build
build --target llama-mtmd-cli) on one text model, one mmproj and one image, and prints each round's
encoder time and the median ratio. A real Gemma 3 mmproj is 800 MB of F16; none ships on PyPI, so
by default a synthetic one of the real shape (896 px, 27 layers of 1152, 4304 FFN) is written with
`loom gguf synth-mmproj` for the default model (Gemma 3 270M, width 640).

usage: python3 scripts/bench_vision.py --llama-cpp-bin DIR [--loom build/bin/loom] [--model M] [--mmproj P]
                                       [--image I] [--layers 27] [--rounds 3] [--threads 2]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loom_encode_ms(args, mmproj, out_json):
    subprocess.run([args.loom, "bench", "--image", args.image, "--model", args.model, "--mmproj", mmproj, "--rounds", "1",
                    "--threads", str(args.threads), "--json", out_json], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(out_json) as f:
        report = json.load(f)
    return report["encode_ms"], report["prefill_ttft_ms"]


def mtmd_encode_ms(args, mmproj):
    # --no-repack: this VM reports AMX that the kernel does not enable (repacked weights would use it).
    out = subprocess.run([os.path.join(args.llama_cpp_bin, "llama-mtmd-cli"), "-m", args.model, "--mmproj", mmproj,
                          "--image", args.image, "-p", "Describe this image.", "-n", "1", "-t", str(args.threads),
                          "--temp", "0", "--no-repack", "--chat-template", "gemma"],
                         capture_output=True, text=True, check=True)
    match = re.search(r"batch encoding done in (\d+) ms", out.stdout + out.stderr) or \
        re.search(r"image slice encoded in (\d+) ms", out.stdout + out.stderr)
    if not match:
        raise RuntimeError("llama-mtmd-cli printed no encoding time:\n" + out.stderr[-2000:])
    return float(match.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp-bin", required=True)
    ap.add_argument("--loom", default=os.path.join(ROOT, "build/bin/loom"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--mmproj", default=None)
    ap.add_argument("--image", default=os.path.join(ROOT, "tests/data/vision/shapes-150x100.png"))
    ap.add_argument("--layers", type=int, default=27)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.model is None:
        with open(os.path.expanduser("~/.cache/loom/default-model.txt")) as f:
            args.model = f.read().strip()
    with tempfile.TemporaryDirectory() as tmp:
        mmproj = args.mmproj
        if mmproj is None:
            mmproj = os.path.join(tmp, "mmproj-gemma3-synthetic.gguf")
            subprocess.run([args.loom, "gguf", "synth-mmproj", "--image-size", "896", "--dim", "1152", "--heads", "16",
                            "--layers", str(args.layers), "--ff", "4304", "--text-dim", "640", "--type", "F16", "-o", mmproj],
                           check=True, stdout=subprocess.DEVNULL)
        loom_ms, mtmd_ms = [], []
        for r in range(args.rounds):
            encode, prefill = loom_encode_ms(args, mmproj, os.path.join(tmp, "loom.json"))
            loom_ms.append(encode)
            mtmd_ms.append(mtmd_encode_ms(args, mmproj))
            print(f"round {r + 1}: loom {encode:.0f} ms (then {prefill:.0f} ms to the first token), "
                  f"llama-mtmd-cli {mtmd_ms[-1]:.0f} ms", flush=True)
        loom_median, mtmd_median = statistics.median(loom_ms), statistics.median(mtmd_ms)
        ratio = mtmd_median / loom_median
        print(f"encode per image, median of {args.rounds}: loom {loom_median:.0f} ms, llama-mtmd-cli {mtmd_median:.0f} ms "
              f"= {ratio:.2f}x (target 1.5x: {'met' if ratio >= 1.5 else 'not met'})")


if __name__ == "__main__":
    main()
