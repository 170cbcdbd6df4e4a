#!/usr/bin/env python3
"""Record llama.cpp's embeddings for Loom's embedding tests (tests/golden/embed/<name>.json).

For each case: a synthetic encoder model written by `loom gguf synth` (regenerated bit for bit by the
test; the fnv1a64 hash proves it) and a few texts of mixed lengths. scripts/reference/embedding_reference.cpp,
built against a llama.cpp build, records each text's tokens and pooled embedding (not normalised), all
texts decoded in one batch, one sequence each.

Usage: python3 scripts/make_embedding_golden.py --llama-cpp DIR [--loom build/bin/loom] [--only NAME...]
  DIR is a llama.cpp source tree with a CPU build in DIR/build (libllama), e.g. the one llama-cpp-python's
  sdist vendors: cmake -B build -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF && cmake --build build --target llama
"""
import argparse
import json
import os
import subprocess
import tempfile

from golden_hash import fnv1a64

TEXTS = [
    "hello world",
    "the cat sat on the mat",
    "a search query about the river bank and the money in it, which is not the same bank at all",
    "Embedding models turn text into vectors!",
    "dog",
]

QUERY = "where is the river bank"
DOCUMENTS = [
    "the river bank is where the water meets the land",
    "the cat sat on the mat",
    "a bank holds money",
    "river",
]

CASES = [
    {
        # all-MiniLM's shape, small: absolute positions, post-norm, GELU, mean pooling.
        "name": "bert-synth",
        "model": ["--arch", "bert", "--layers", "3", "--dim", "128", "--heads", "4", "--ff", "256", "--vocab", "800",
                  "--ctx", "128", "--seed", "111", "--type", "F16"],
    },
    {
        # nomic-embed-text's shape, small: no position table, NEOX rope at base 1000 from a fused q/k/v,
        # a SiLU-gated FFN.
        "name": "nomic-bert-synth",
        "model": ["--arch", "nomic-bert", "--layers", "3", "--dim", "128", "--heads", "4", "--ff", "256", "--vocab", "800",
                  "--ctx", "128", "--seed", "131", "--type", "F16"],
    },
    {
        # jina-embeddings-v2's shape, small: ALiBi in place of positions (six heads, so both of ggml's
        # slope series), a GEGLU FFN from a fused up matrix.
        "name": "jina-bert-v2-synth",
        "model": ["--arch", "jina-bert-v2", "--layers", "3", "--dim", "192", "--heads", "6", "--ff", "256", "--vocab", "800",
                  "--ctx", "128", "--seed", "151", "--type", "F16"],
    },
    {
        # ModernBERT's shape, small: pre-norm without biases, rope at a global and a local base, layers
        # 1 and 2 within a symmetric window of 8 (narrower than most texts), GEGLU, a final norm.
        "name": "modern-bert-synth",
        "model": ["--arch", "modern-bert", "--layers", "3", "--dim", "128", "--heads", "4", "--ff", "256", "--vocab", "800",
                  "--ctx", "128", "--seed", "161", "--type", "F16", "--sliding-window", "8"],
    },
    {
        # gte-reranker-modernbert's shape, small: the modern-bert blocks, rank pooling through a head that
        # sees the mean of the rows (classifier.pooling_type absent: llama.cpp's default for modern-bert),
        # dense, GELU, a layer norm, one logit.
        "name": "modern-bert-reranker-synth",
        "model": ["--arch", "modern-bert", "--layers", "3", "--dim", "128", "--heads", "4", "--ff", "256", "--vocab", "800",
                  "--ctx", "128", "--seed", "191", "--type", "F16", "--sliding-window", "8", "--classifier"],
        "rerank": True,
    },
    {
        # EmbeddingGemma's shape, small: Gemma 3 blocks with bidirectional attention, grouped heads, local
        # layers (0 and 2) within a symmetric window of 8, mean pooling, then the dense_2 / dense_3 projections.
        "name": "gemma-embedding-synth",
        "model": ["--arch", "gemma-embedding", "--layers", "3", "--dim", "128", "--heads", "4", "--kv-heads", "2", "--ff", "256",
                  "--vocab", "512", "--ctx", "256", "--seed", "171", "--type", "F16", "--sliding-window", "8"],
    },
    {
        # A decoder used as an embedder (Qwen3-Embedding's way): qwen3 blocks, causal, the last row of
        # each input after the final norm (qwen3.pooling_type 3).
        "name": "qwen3-embed-synth",
        "model": ["--arch", "qwen3", "--layers", "3", "--dim", "128", "--heads", "4", "--kv-heads", "2", "--ff", "256",
                  "--vocab", "512", "--ctx", "256", "--seed", "141", "--type", "F16", "--pooling", "last"],
    },
    {
        # Qwen3-Reranker's shape, small: qwen3 blocks, causal; the last row of each pair, laid out by the
        # model's rerank template, through the yes/no head (cls.output), then a softmax (score: P(yes)).
        "name": "qwen3-reranker-synth",
        "model": ["--arch", "qwen3", "--layers", "3", "--dim", "128", "--heads", "4", "--kv-heads", "2", "--ff", "256",
                  "--vocab", "512", "--ctx", "1024", "--seed", "188", "--type", "F16", "--classifier",
                  "--control-tokens", "<|im_start|>,<|im_end|>"],
        "rerank": True,
    },
    {
        # bge-reranker's shape, small: the same blocks, rank pooling through cls and cls.output, one label;
        # each (query, document) pair laid out as llama-server's rerank does.
        "name": "bert-reranker-synth",
        "model": ["--arch", "bert", "--layers", "3", "--dim", "128", "--heads", "4", "--ff", "256", "--vocab", "800",
                  "--ctx", "128", "--seed", "121", "--type", "F16", "--classifier"],
        "rerank": True,
    },
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--loom", default="build/bin/loom")
    ap.add_argument("--out", default="tests/golden/embed")
    ap.add_argument("--only", nargs="*", help="the cases to record (default: all)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lcpp = os.path.abspath(args.llama_cpp)
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        helper = os.path.join(tmp, "embedding_reference")
        subprocess.run(["g++", "-std=c++17", "-O2", os.path.join(root, "scripts/reference/embedding_reference.cpp"),
                        "-I" + lcpp + "/include", "-I" + lcpp + "/ggml/include", "-L" + lcpp + "/build/bin", "-lllama",
                        "-lggml", "-lggml-base", "-Wl,-rpath," + lcpp + "/build/bin", "-o", helper], check=True)
        for case in CASES:
            if args.only and case["name"] not in args.only:
                continue
            model = os.path.join(tmp, "model.gguf")
            subprocess.run([args.loom, "gguf", "synth", *case["model"], "-o", model], check=True, stdout=subprocess.DEVNULL)
            texts = DOCUMENTS if case.get("rerank") else TEXTS
            argv = [helper, model, "--rerank", QUERY, *DOCUMENTS] if case.get("rerank") else [helper, model, *TEXTS]
            ref = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
            golden = {
                "generator": "scripts/make_embedding_golden.py (llama-cpp-python 0.3.36's llama.cpp)",
                "model": {"args": case["model"], "fnv1a64": fnv1a64(open(model, "rb").read())},
                "inputs": [{"text": t, "tokens": r["tokens"], "embedding": [float("%.7g" % v) for v in r["embedding"]]}
                           for t, r in zip(texts, ref["inputs"])],
            }
            if case.get("rerank"):
                golden["query"] = QUERY
            path = os.path.join(args.out, case["name"] + ".json")
            with open(path, "w") as f:
                json.dump(golden, f, separators=(",", ":"))
                f.write("\n")
            print("wrote", path)


if __name__ == "__main__":
    main()
