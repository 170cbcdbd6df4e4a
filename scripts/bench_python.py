#!/usr/bin/env python3
"""Python's generate() against `loom bench`'s batched decode at the same batch size (issue 42: at least
0.97x), alternating in one run on the same model and threads.

Both count decode as `loom bench` does: tokens generated after each request's first, over the time from
the first request's first token to the last token. Python's side submits token ids (random 16-token
prompts, as the bench's) through LLM.generate with ignore_eos, so every request makes --tg tokens.

usage: scripts/bench_python.py [--model GGUF] [--batch 64] [--tg 64] [--rounds 3] [--threads 2]
Needs the loom package installed (scripts/build_wheel.sh, then pip install build/wheelhouse/*.whl).
"""
import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import loom

LIMIT = 0.97


def bench_decode(model, batch, tg, threads):
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run([loom.binary(), "bench", "--model", model, "--threads", str(threads), "--batch", str(batch), "--tg", str(tg),
                        "--pp", "16", "--rounds", "1", "--reference-tokens", "0", "--no-grammar", "--json", report.name],
                       check=True, capture_output=True, text=True)
        data = json.loads(Path(report.name).read_text())
    return next(b["decode_tokens_per_s"] for b in data["batched_decode"] if b["batch"] == batch)


def python_decode(llm, batch, tg, seed):
    rng = random.Random(seed)
    n_vocab_safe = 1000  # ordinary token ids, as the bench's random prompts
    prompts = [[rng.randrange(10, n_vocab_safe) for _ in range(16)] for _ in range(batch)]
    params = loom.SamplingParams(max_tokens=tg, ignore_eos=True, temperature=0)  # greedy, as loom bench
    start = time.perf_counter()
    outputs = llm.generate(prompts, params)
    end = time.perf_counter()
    generated = sum(len(o.outputs[0].token_ids) for o in outputs)
    first = start + min(o.ttft_seconds for o in outputs)
    return (generated - batch) / (end - first), generated / (end - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=(Path.home() / ".cache/loom/default-model.txt").read_text().strip())
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    llm = loom.LLM(model=a.model, config={"backend": {"threads": a.threads}})
    cli, py, py_total = [], [], []
    for r in range(a.rounds):
        cli.append(bench_decode(a.model, a.batch, a.tg, a.threads))
        decode, total = python_decode(llm, a.batch, a.tg, 100 + r)
        py.append(decode)
        py_total.append(total)
        print(f"round {r + 1}: loom bench {cli[-1]:.1f} tok/s, Python generate {py[-1]:.1f} tok/s decode "
              f"({py_total[-1]:.1f} end to end)", flush=True)
    c, p = statistics.median(cli), statistics.median(py)
    print(f"batch {a.batch}, tg {a.tg}, {a.threads} threads, median of {a.rounds}: Python {p:.1f} / loom bench {c:.1f} "
          f"= {p / c:.3f}x (limit {LIMIT}x): {'ok' if p / c >= LIMIT else 'BELOW'}")


if __name__ == "__main__":
    main()
