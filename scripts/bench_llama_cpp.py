#!/usr/bin/env python3
"""llama.cpp's prefill and decode speed on a GGUF model, for comparison with `loom generate`.

Runs through llama-cpp-python's low-level API (pip install llama-cpp-python), CPU only:
  python3 scripts/bench_llama_cpp.py [--model PATH] [--threads 2] [--prompt-tokens 128] [--decode-tokens 64]

Prefill: one batch of --prompt-tokens tokens (a repeated sentence), timed from llama_decode to its return.
Decode: --decode-tokens greedy single-token steps after it (argmax over the logits included, as in
`loom generate`). Compare with: loom generate "<same text>" --temp 0 --threads N --max-tokens M.
"""
import argparse
import os
import time

import numpy as np

from make_golden import DEFAULT_MODEL, LlamaCpp


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("LOOM_MODEL") or DEFAULT_MODEL)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--decode-tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is reported")
    args = parser.parse_args()

    llm = LlamaCpp(args.model, threads=args.threads)
    text = "The quick brown fox jumps over the lazy dog. " * 64
    tokens = llm.tokenize(text)[: args.prompt_tokens]
    best_prefill, best_decode = 0.0, 0.0
    for _ in range(args.repeat):
        ctx = llm.new_context(1024)
        t0 = time.perf_counter()
        logits = llm.decode(ctx, tokens)
        t1 = time.perf_counter()
        for _ in range(args.decode_tokens):
            logits = llm.decode(ctx, [int(np.argmax(logits))])
        t2 = time.perf_counter()
        llm.free_context(ctx)
        best_prefill = max(best_prefill, len(tokens) / (t1 - t0))
        best_decode = max(best_decode, args.decode_tokens / (t2 - t1))
    print("llama.cpp %s, %d threads: prefill %d tokens %.1f tok/s, decode %.1f tok/s (best of %d)"
          % (os.path.basename(args.model), args.threads, len(tokens), best_prefill, best_decode, args.repeat))


if __name__ == "__main__":
    main()
