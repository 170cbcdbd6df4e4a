#!/usr/bin/env python3
"""Mean time to first token of a grouped workload through vllm-router, per routing policy.

Starts scripts/cluster.sh (3 replicas of MODEL, default: the installed default model) for each
policy and sends 6 conversation groups x 10 requests sharing a per-group prefix of --prefix tokens
(each group's first request straight to replica group % 3, as earlier traffic; the rest through the
router, groups shuffled each round), streaming, one token each. Prints the mean and p50 TTFT of the
routed requests and the prefix-cache hit rate (cached prompt tokens / prompt tokens) per policy.

  python3 scripts/bench_router.py [--model GGUF] [--prefix 1024] [--policies kv_aware round_robin]
"""
import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))
import test_router as t  # noqa: E402  (the cluster harness and counters)


def ttft(port, tokens):
    body = json.dumps({"prompt": tokens, "max_tokens": 1, "temperature": 0, "stream": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as resp:
        for line in resp:
            if line.startswith(b"data:"):
                return time.perf_counter() - start
    raise RuntimeError("no token streamed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loom", default=os.path.join(HERE, "..", "build", "bin", "loom"))
    ap.add_argument("--model", default="")
    ap.add_argument("--prefix", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1, help="backend threads per replica")
    ap.add_argument("--policies", nargs="+", default=["kv_aware", "round_robin"])
    args = ap.parse_args()
    if not args.model:
        with open(os.path.expanduser("~/.cache/loom/default-model.txt")) as f:
            args.model = f.read().strip()
    args.script = os.path.join(HERE, "cluster.sh")
    scratch = tempfile.mkdtemp(prefix="loom-bench-router-")
    with open(os.path.join(scratch, "replica.toml"), "w") as f:
        f.write(f'[backend]\nthreads = {args.threads}\n[kv]\nmemory = "512MiB"\nblock_size = 16\n')
    rng = random.Random(22)
    prefixes = [[rng.randrange(100, 20000) for _ in range(args.prefix)] for _ in range(t.GROUPS)]
    requests = []
    for j in range(t.PER_GROUP):
        for g in rng.sample(range(t.GROUPS), t.GROUPS):
            requests.append((g, j, prefixes[g] + [rng.randrange(100, 20000) for _ in range(t.TAIL)]))
    print(f"model {args.model}; {t.REPLICAS} replicas x {args.threads} thread(s); prefix {args.prefix} tokens")
    for policy in args.policies:
        cluster = t.Cluster(args.script, args.loom, args.model, policy, scratch)
        try:
            before = [t.prefix_counters(p) for p in cluster.workers]
            times = []
            for g, j, tokens in requests:
                if j == 0:
                    ttft(cluster.workers[g % t.REPLICAS], tokens)
                else:
                    times.append(ttft(cluster.router, tokens))
                    time.sleep(0.05)
            after = [t.prefix_counters(p) for p in cluster.workers]
        finally:
            cluster.stop()
        hits = sum(a[0] - b[0] for a, b in zip(after, before))
        queries = sum(a[1] - b[1] for a, b in zip(after, before))
        print(f"{policy:12s}: TTFT mean {statistics.mean(times):.3f} s, p50 {statistics.median(times):.3f} s over "
              f"{len(times)} routed requests; prefix-cache hit rate {hits / queries:.3f}")


if __name__ == "__main__":
    main()
