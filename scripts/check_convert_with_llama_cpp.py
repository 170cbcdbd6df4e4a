#!/usr/bin/env python3
"""Check that llama.cpp loads the GGUF files `loom convert` writes from Hugging Face folders, and that
its next-token log-probabilities equal Loom's on the folder itself (issue 38).

For each decoder family of scripts/make_hf_checkpoint.py: write the synthetic folder, `loom convert` it
to a GGUF (F16 as stored, or the checkpoint's own type), run llama.cpp on that file
(scripts/reference/logits_reference.cpp, built here against the llama.cpp tree) and `loom serve` on the
folder, and compare the 20 most likely next tokens after a prompt of token ids (by text, where the
texts are distinct) and 8 greedy tokens. Not a test: it needs a llama.cpp build.

usage: check_convert_with_llama_cpp.py --llama-cpp TREE [--family NAME ...] [--loom build/bin/loom]
                                      [--plugins build/lib/loom/plugins]
       (TREE holds include/, ggml/include/ and a CMake build in build/ with libllama)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))

FAMILIES = {"llama": ["--tied"], "mistral": [], "qwen2": [], "qwen3": [], "qwen2_moe": [], "qwen3_moe": [],
            "gemma2": [], "gemma3_text": [], "gemma4_text": [], "phi3": [], "olmo2": [], "smollm3": [], "granite": [], "gpt_oss": [],
            "qwen3_5_text": [], "qwen3_5_moe_text": [], "qwen3_next": []}
PROMPT = [5, 17, 99, 240, 3, 77, 41, 42, 43, 300]


def build_reference(tree, out_dir):
    exe = os.path.join(out_dir, "logits_reference")
    lib_dirs = [os.path.join(tree, "build", "bin"), os.path.join(tree, "build", "src")]
    subprocess.run(["g++", "-O2", "-std=c++17", os.path.join(HERE, "reference", "logits_reference.cpp"),
                    "-I", os.path.join(tree, "include"), "-I", os.path.join(tree, "ggml", "include"),
                    *[f"-L{d}" for d in lib_dirs], *[f"-Wl,-rpath,{d}" for d in lib_dirs], "-lllama", "-o", exe],
                   check=True)
    return exe


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--loom", default=os.path.join(ROOT, "build", "bin", "loom"))
    ap.add_argument("--plugins", default=os.path.join(ROOT, "build", "lib", "loom", "plugins"))
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES), help="only these (default: all)")
    args = ap.parse_args()

    import server_harness
    from server_harness import LoomServer
    server_harness.configure(args.loom, args.plugins)
    work = tempfile.mkdtemp(prefix="loom-convert-check-")
    reference = build_reference(args.llama_cpp, work)
    config = server_harness.write_config("convert-check.toml")
    worst_all = 0.0
    for family, options in FAMILIES.items():
        if args.family and family not in args.family:
            continue
        folder, converted = os.path.join(work, family), os.path.join(work, family + ".gguf")
        subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), "--family", family, "--out", folder,
                        *options], check=True)
        subprocess.run([args.loom, "convert", folder, converted, "--force"], check=True, stdout=subprocess.DEVNULL)
        theirs = json.loads(subprocess.run([reference, converted, *map(str, PROMPT)], check=True, capture_output=True,
                                           text=True).stdout)
        server = LoomServer(config, folder)
        try:
            status, body = server.json("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0,
                                                                   "logprobs": 20, "ignore_eos": True})
            assert status == 200, body
            ours = body["choices"][0]["logprobs"]["top_logprobs"][0]
            texts = {}
            for token, logprob in theirs["top"]:
                _, piece = server.json("POST", "/detokenize", {"tokens": [token]})
                texts.setdefault(piece["content"], []).append(logprob)
            diffs = [abs(ours[t] - lps[0]) for t, lps in texts.items() if len(lps) == 1 and t in ours]
            # Joined, or token by token: the joined bytes of partial UTF-8 tokens may decode otherwise than the
            # response's text, and a SentencePiece token's piece alone loses its leading space.
            _, greedy = server.json("POST", "/detokenize", {"tokens": theirs["greedy"]})
            pieces = [server.json("POST", "/detokenize", {"tokens": [t]})[1]["content"] for t in theirs["greedy"]]
            same_greedy = greedy["content"] == body["choices"][0]["text"] or pieces == body["choices"][0]["logprobs"]["tokens"]
        finally:
            server.terminate()
        worst = max(diffs) if diffs else float("nan")
        worst_all = max(worst_all, worst)
        print(f"{family:12s} llama.cpp loads the converted file; top log-probs compared: {len(diffs):2d}, "
              f"largest difference {worst:.2e}; greedy text {'equal' if same_greedy else 'DIFFERS'}")
    print(f"largest difference over all families: {worst_all:.2e}")


if __name__ == "__main__":
    main()
