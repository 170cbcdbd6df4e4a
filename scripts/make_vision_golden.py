#!/usr/bin/env python3
"""Record llama.cpp mtmd's output for Loom's vision tests (tests/golden/vision/<name>.json).

For each case: a synthetic text model and a synthetic mmproj written by `loom gguf synth` and
`loom gguf synth-mmproj` (regenerated bit for bit by the test; the fnv1a64 hashes prove it), a fixed
PNG from tests/data/vision (PNG, so both engines see the same RGB bytes), and a prompt holding mtmd's
marker <__media__>. scripts/reference/mtmd_reference.cpp, built against a llama.cpp build, records:
  chunks   the prompt as mtmd splits it: {"text": [ids]} or {"image": rows}
  pixels   fnv1a64 of the encoder's input (planar float32 bytes) and its length; Loom's must be equal
  rows     the image's embedding rows, [rows][n_embd_text]
  top      the 20 highest logits after the whole prompt (image rows decoded non-causally, as mtmd does)
  greedy   16 greedy tokens after the prompt

Usage: python3 scripts/make_vision_golden.py --llama-cpp DIR [--loom build/bin/loom]
  DIR is a llama.cpp source tree with a CPU build in DIR/build (libllama, libmtmd), e.g. the one
  llama-cpp-python's sdist vendors: cmake -B build -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF && cmake --build build
"""
import argparse
import json
import os
import struct
import subprocess
import tempfile

from golden_hash import fnv1a64

CASES = [
    {
        "name": "gemma3-synth",
        "text": ["--arch", "gemma3", "--layers", "6", "--dim", "128", "--heads", "4", "--kv-heads", "1",
                 "--head-dim", "64", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "41",
                 "--type", "F16", "--image-markers"],
        "mmproj": ["--projector", "gemma3", "--image-size", "224", "--patch", "14", "--dim", "64", "--heads", "4",
                   "--layers", "2", "--ff", "128", "--text-dim", "128", "--merge", "4", "--type", "F16", "--seed", "42"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "hello <__media__> the quick brown fox",
    },
    {
        # LLaVA 1.5's shape on a llama text model: CLIP with a CLS row and pre-norm, quick GELU, the
        # second-to-last layer, a two-layer MLP projector; bicubic letterboxing on the mean colour.
        "name": "llava-mlp-synth",
        "text": ["--arch", "llama", "--layers", "4", "--dim", "128", "--heads", "4", "--kv-heads", "2",
                 "--head-dim", "32", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "59",
                 "--type", "F16"],
        "mmproj": ["--projector", "mlp", "--image-size", "112", "--patch", "14", "--dim", "64", "--heads", "4",
                   "--layers", "3", "--ff", "128", "--text-dim", "128", "--proj-hidden", "96", "--type", "F16",
                   "--seed", "52"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "describe <__media__> in one word",
    },
    {
        # Pixtral's shape (Mistral Small 3.1's patch merger, merge 2) on a llama text model with
        # [IMG_BREAK] and [IMG_END]: any image size (150x100 becomes 144x96, 18x12 patches, 9x6 merged
        # cells and 5 break rows), 2-D RoPE, RMS norms, a SiLU-gated FFN.
        "name": "pixtral-synth",
        "text": ["--arch", "llama", "--layers", "4", "--dim", "128", "--heads", "4", "--kv-heads", "2",
                 "--head-dim", "32", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "59",
                 "--type", "F16", "--control-tokens", "[IMG_BREAK],[IMG_END]"],
        "mmproj": ["--projector", "pixtral", "--image-size", "512", "--patch", "8", "--dim", "64", "--heads", "4",
                   "--layers", "3", "--ff", "128", "--text-dim", "128", "--proj-hidden", "96", "--merge", "2",
                   "--type", "F16", "--seed", "62"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "describe <__media__> in one word",
    },
    {
        # SmolVLM's shape (idefics3) on a llama text model with its layout tokens: the image stretched to
        # the longest edge (128, Lanczos), then to whole 64-pixel tiles (2 x 2), each tile and an overview
        # through a 2-layer SigLIP, pixel-shuffled 2 x 2 and projected: 5 parts of 16 rows, with
        # <fake_token_around_image><row_Y_col_X> before each tile, "\n" between rows of tiles, and
        # "\n\n<fake_token_around_image><global-img>" ... "<fake_token_around_image>" around the overview.
        "name": "idefics3-synth",
        "text": ["--arch", "llama", "--layers", "4", "--dim", "128", "--heads", "4", "--kv-heads", "2",
                 "--head-dim", "32", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "59",
                 "--type", "F16", "--control-tokens",
                 "\n\n,<fake_token_around_image>,<global-img>,<row_1_col_1>,<row_1_col_2>,<row_2_col_1>,<row_2_col_2>"],
        "mmproj": ["--projector", "idefics3", "--image-size", "64", "--patch", "8", "--dim", "64", "--heads", "4",
                   "--layers", "2", "--ff", "128", "--text-dim", "128", "--merge", "2", "--longest-edge", "128",
                   "--type", "F16", "--seed", "72"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "describe <__media__> in one word",
    },
    {
        # Gemma 4's shape (gemma4v) on a synthetic Gemma 4 text model (per-layer embeddings, which image
        # rows take from token 0): 150x100 becomes 176x112 (at least 70 pooled cells), 22x14 patches
        # pooled 2 x 2 into 77 rows between <|image> and <image|>, decoded non-causally (width 128 is
        # neither E2B's nor E4B's). Position tables, q/k/v norms, NEOX 2-D RoPE, sandwich norms, layer
        # scalars and clamped linears (bounds that bite, some absent), std_bias / std_scale.
        "name": "gemma4v-synth",
        "text": ["--arch", "gemma4", "--layers", "6", "--dim", "128", "--heads", "4", "--kv-heads", "2",
                 "--head-dim", "32", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "81",
                 "--type", "F16", "--control-tokens", "<|image>,<image|>"],
        "mmproj": ["--projector", "gemma4v", "--image-size", "224", "--patch", "8", "--dim", "64", "--heads", "4",
                   "--layers", "2", "--ff", "128", "--text-dim", "128", "--merge", "2", "--type", "F16",
                   "--seed", "82"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "describe <__media__> in one word",
    },
    {
        # Qwen2.5-VL's shape (qwen25vl) on a synthetic qwen2vl text model (M-RoPE, sections 4/6/6 of 16
        # pairs): 150x100 becomes 144x96 (18x12 patches, 9x6 merged cells: 54 rows between
        # <|vision_start|> and <|vision_end|>, decoded causally); windows of 7x7 cells (112 px) split
        # the grid in two, layer 1 of 3 attends over all of it; the rows' text positions are
        # (t, t + row, t + column) and the text after the image continues at t + 9.
        "name": "qwen25vl-synth",
        "text": ["--arch", "qwen2vl", "--layers", "4", "--dim", "128", "--heads", "4", "--kv-heads", "2",
                 "--head-dim", "32", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "91",
                 "--type", "F16", "--control-tokens", "<|vision_start|>,<|vision_end|>"],
        "mmproj": ["--projector", "qwen25vl", "--image-size", "560", "--patch", "8", "--dim", "64", "--heads", "4",
                   "--layers", "3", "--ff", "128", "--text-dim", "128", "--type", "F16", "--seed", "92"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "describe <__media__> in one word",
    },
    {
        # Qwen3-VL's shape (qwen3vl) on a synthetic qwen3vl text model (interleaved M-RoPE, sections
        # 8/4/4 of 16 pairs, so pairs 13 and 14 take the extra component as in the real model; three
        # deepstack layers): 150x100 becomes 144x96 (18x12 patches, 54 rows between <|vision_start|>
        # and <|vision_end|>); the 16x16 position table resized to 18x12; deepstack mergers on layers
        # 1-3 of 4, whose rows the text model adds after its layers 0-2.
        "name": "qwen3vl-synth",
        "text": ["--arch", "qwen3vl", "--layers", "4", "--dim", "128", "--heads", "4", "--kv-heads", "2",
                 "--head-dim", "32", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "101",
                 "--type", "F16", "--control-tokens", "<|vision_start|>,<|vision_end|>"],
        "mmproj": ["--projector", "qwen3vl", "--image-size", "128", "--patch", "8", "--dim", "64", "--heads", "4",
                   "--layers", "4", "--ff", "128", "--text-dim", "128", "--type", "F16", "--seed", "102"],
        "image": "tests/data/vision/shapes-150x100.png",
        "prompt": "describe <__media__> in one word",
    },
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--loom", default="build/bin/loom")
    ap.add_argument("--out", default="tests/golden/vision")
    ap.add_argument("--only", nargs="*", help="the cases to record (default: all)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lcpp = os.path.abspath(args.llama_cpp)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        helper = os.path.join(tmp, "mtmd_reference")
        subprocess.run(["g++", "-std=c++17", "-O2", os.path.join(root, "scripts/reference/mtmd_reference.cpp"),
                        "-I" + lcpp + "/tools/mtmd", "-I" + lcpp + "/include", "-I" + lcpp + "/ggml/include",
                        "-L" + lcpp + "/build/bin", "-lmtmd", "-lllama", "-lggml", "-lggml-base",
                        "-Wl,-rpath," + lcpp + "/build/bin", "-o", helper], check=True)
        for case in CASES:
            if args.only and case["name"] not in args.only:
                continue
            text_path, mmproj_path = os.path.join(tmp, "text.gguf"), os.path.join(tmp, "mmproj.gguf")
            subprocess.run([args.loom, "gguf", "synth", *case["text"], "-o", text_path], check=True, stdout=subprocess.DEVNULL)
            subprocess.run([args.loom, "gguf", "synth-mmproj", *case["mmproj"], "-o", mmproj_path], check=True,
                           stdout=subprocess.DEVNULL)
            out = subprocess.run([helper, text_path, mmproj_path, os.path.join(root, case["image"]), case["prompt"]],
                                 check=True, capture_output=True, text=True).stdout
            ref = json.loads(out)
            pixels = struct.pack("<%df" % len(ref["pixels"]), *ref["pixels"])
            golden = {
                "generator": "scripts/make_vision_golden.py (llama-cpp-python 0.3.36's llama.cpp, mtmd)",
                "text_model": {"args": case["text"], "fnv1a64": fnv1a64(open(text_path, "rb").read())},
                "mmproj": {"args": case["mmproj"], "fnv1a64": fnv1a64(open(mmproj_path, "rb").read())},
                "image": case["image"],
                "prompt": case["prompt"],
                "chunks": ref["chunks"],
                "pixels": {"count": len(ref["pixels"]), "fnv1a64": fnv1a64(pixels)},
                "rows": [float("%.7g" % v) for v in ref["rows"]],
                "n_past": ref["n_past"],
                "top": ref["top"],
                "greedy": ref["greedy"],
            }
            path = os.path.join(args.out, case["name"] + ".json")
            with open(path, "w") as f:
                json.dump(golden, f, separators=(",", ":"))
                f.write("\n")
            print("wrote", path)


if __name__ == "__main__":
    main()
