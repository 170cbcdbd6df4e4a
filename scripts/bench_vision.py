#!/usr/bin/env python3
"""Image encoding against llama.cpp's mtmd on the same files, in the same run (issue 36's target: encode
at least 1.5x faster on 2 threads).

Alternates `loom bench --image` and `llama-mtmd-cli` (built from the vendored llama.cpp: cmake --build
build --target llama-mtmd-cli) on one text model, one mmproj and one image, and prints each round's
encoder time and the median ratio. A real Gemma 3 mmproj is 800 MB of F16; none ships on PyPI, so
by default a synthetic one of the real shape (896 px, 27 layers of 1152, 4304 FFN) is written with
`loom gguf synth-mmproj` for the default model (Gemma 3 270M, width 640).

--projector pixtral measures Mistral Small 3.1's vision tower instead (24 layers of 1024, FFN 4096,
patches of 16, a 2x2 patch merger; synthetic, F16) on a 1024x768 image (3,072 patches, 791 rows), with a
synthetic llama text model of width 640 that has [IMG_BREAK] and [IMG_END].

usage: python3 scripts/bench_vision.py --llama-cpp-bin DIR [--loom build/bin/loom] [--model M] [--mmproj P]
                                       [--image I] [--layers N] [--rounds 3] [--threads 2] [--projector gemma3|pixtral]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import struct
import tempfile
import zlib

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
                         capture_output=True, text=True, errors="replace", check=True)
    match = re.search(r"batch encoding done in (\d+) ms", out.stdout + out.stderr) or \
        re.search(r"image slice encoded in (\d+) ms", out.stdout + out.stderr)
    if not match:
        raise RuntimeError("llama-mtmd-cli printed no encoding time:\n" + out.stderr[-2000:])
    return float(match.group(1))


def write_png(path, width, height):
    """A smooth RGB gradient as a PNG (no imaging library needed)."""
    rows = b"".join(b"\x00" + bytes(((x * 255) // width, (y * 255) // height, ((x + y) * 127) // (width + height))[c]
                                     for x in range(width) for c in range(3)) for y in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def synthesize_pixtral(args, tmp):
    text, mmproj, image = (os.path.join(tmp, n) for n in ("text-llama.gguf", "mmproj-pixtral-synthetic.gguf", "gradient-1024x768.png"))
    subprocess.run([args.loom, "gguf", "synth", "--arch", "llama", "--layers", "2", "--dim", "640", "--heads", "8", "--kv-heads", "2",
                    "--ff", "1280", "--vocab", "512", "--ctx", "2048", "--type", "F16", "--control-tokens", "[IMG_BREAK],[IMG_END]",
                    "-o", text], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([args.loom, "gguf", "synth-mmproj", "--projector", "pixtral", "--image-size", "1024", "--patch", "16",
                    "--dim", "1024", "--heads", "16", "--layers", str(args.layers or 24), "--ff", "4096", "--text-dim", "640",
                    "--proj-hidden", "640", "--merge", "2", "--type", "F16", "-o", mmproj], check=True, stdout=subprocess.DEVNULL)
    write_png(image, 1024, 768)
    return text, mmproj, image


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp-bin", required=True)
    ap.add_argument("--loom", default=os.path.join(ROOT, "build/bin/loom"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--mmproj", default=None)
    ap.add_argument("--image", default=os.path.join(ROOT, "tests/data/vision/shapes-150x100.png"))
    ap.add_argument("--layers", type=int, default=None, help="encoder layers (default: the real model's)")
    ap.add_argument("--projector", choices=["gemma3", "pixtral"], default="gemma3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.model is None and args.projector == "gemma3":
        with open(os.path.expanduser("~/.cache/loom/default-model.txt")) as f:
            args.model = f.read().strip()
    with tempfile.TemporaryDirectory() as tmp:
        mmproj = args.mmproj
        if args.projector == "pixtral":
            args.model, mmproj, image = synthesize_pixtral(args, tmp)
            if args.image == os.path.join(ROOT, "tests/data/vision/shapes-150x100.png"):
                args.image = image
        elif mmproj is None:
            mmproj = os.path.join(tmp, "mmproj-gemma3-synthetic.gguf")
            subprocess.run([args.loom, "gguf", "synth-mmproj", "--image-size", "896", "--dim", "1152", "--heads", "16",
                            "--layers", str(args.layers or 27), "--ff", "4304", "--text-dim", "640", "--type", "F16", "-o", mmproj],
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
