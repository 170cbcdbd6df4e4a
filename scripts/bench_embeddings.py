#!/usr/bin/env python3
"""Embedding throughput against llama.cpp's llama-server (issue 37's target: at least 2x), on one model
file, through one client, in the same run, alternating.

Both servers get the same 256 inputs of 16 to 256 tokens (token-id arrays, so both embed exactly the
same ids), sent as requests of --per-request inputs by --concurrency client threads, and the embedded
tokens per second are timed from the first request to the last answer. Without --model, a synthetic
bert of all-MiniLM-L6's shape (6 layers of 384, 12 heads, FFN 1536, 30,522 tokens, 512 positions, F16)
is written with `loom gguf synth`.

usage: python3 scripts/bench_embeddings.py --llama-cpp-bin DIR [--loom build/bin/loom] [--model M]
                                           [--rounds 3] [--threads 2] [--per-request 16] [--concurrency 4]
"""
import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inputs(n_vocab):
    rng = random.Random(37)
    out = []
    for _ in range(256):
        length = rng.randint(16, 256)
        out.append([101] + [rng.randrange(1000, n_vocab) for _ in range(length - 2)] + [102])
    return out


def start(cmd, pattern, env=None):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(pattern, line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # drain the log
            return proc, m
    proc.kill()
    raise RuntimeError("server did not start: " + " ".join(cmd))


def run_load(port, batches, concurrency):
    """Sends every batch as one /v1/embeddings request; returns the seconds from the first to the last."""
    todo = list(batches)
    lock = threading.Lock()
    errors = []

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                if not todo:
                    return
                batch = todo.pop()
            conn.request("POST", "/v1/embeddings", body=json.dumps({"input": batch}),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                errors.append(body[:300])
                return
            if len(json.loads(body)["data"]) != len(batch):
                errors.append(b"wrong number of embeddings")

    start_time = time.time()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("a request failed: %r" % errors[0])
    return time.time() - start_time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp-bin", required=True)
    ap.add_argument("--loom", default=os.path.join(ROOT, "build/bin/loom"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--per-request", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = os.path.join(tmp, "minilm-l6-shaped.gguf")
            subprocess.run([args.loom, "gguf", "synth", "--arch", "bert", "--layers", "6", "--dim", "384", "--heads", "12",
                            "--ff", "1536", "--vocab", "30522", "--ctx", "512", "--type", "F16", "-o", model],
                           check=True, stdout=subprocess.DEVNULL)
        data = inputs(30522)
        n_tokens = sum(len(x) for x in data)
        batches = [data[i:i + args.per_request] for i in range(0, len(data), args.per_request)]
        config = os.path.join(tmp, "loom.toml")
        with open(config, "w") as f:
            f.write(f"[backend]\nthreads = {args.threads}\n[scheduler]\nmax_batched_tokens = 4096\n")
        loom, m = start([args.loom, "serve", "--config", config, "--model", model, "--port", "0"], r"listening on http://[\d.]+:(\d+)")
        loom_port = int(m.group(1))
        llama, _ = start([os.path.join(args.llama_cpp_bin, "llama-server"), "-m", model, "--embedding", "--pooling", "mean",
                          "-t", str(args.threads), "-c", str(512 * args.concurrency), "-np", str(args.concurrency),
                          "-b", "512", "-ub", "512", "--port", "8097", "--host", "127.0.0.1"], r"listening on http://")
        try:
            run_load(loom_port, batches[:2], 1)  # warm both
            run_load(8097, batches[:2], 1)
            loom_tps, llama_tps = [], []
            for r in range(args.rounds):
                loom_tps.append(n_tokens / run_load(loom_port, batches, args.concurrency))
                llama_tps.append(n_tokens / run_load(8097, batches, args.concurrency))
                print(f"round {r + 1}: loom {loom_tps[-1]:.0f} tokens/s, llama-server {llama_tps[-1]:.0f} tokens/s", flush=True)
        finally:
            loom.terminate()
            llama.terminate()
        lm, ll = statistics.median(loom_tps), statistics.median(llama_tps)
        print(f"{len(data)} inputs, {n_tokens} tokens, {args.per_request} per request, {args.concurrency} at a time, "
              f"{args.threads} threads: loom {lm:.0f} tokens/s, llama-server {ll:.0f} tokens/s = {lm / ll:.2f}x "
              f"(target 2x: {'met' if lm / ll >= 2 else 'not met'})")


if __name__ == "__main__":
    main()
