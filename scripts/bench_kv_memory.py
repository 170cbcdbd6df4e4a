#!/usr/bin/env python3
"""KV memory for N sequences of T tokens: `loom serve` against `llama-server -c N*T -np N`, in one run.

llama-server is started first and its KV cache sizes are read from its log (`llama_kv_cache: size =`,
one line per layer kind: full attention and sliding window); Loom then gets a pool of the same
size at most ([kv] memory, window_seqs = N, state_checkpoints = 0) and reports its own on the
start-up line. Each server then runs N requests of T - 16 prompt tokens at once (token ids, the
same for both), 8 generated tokens each: every one must be answered, and for Loom all N must have
run together (/metrics). Prints both sizes, the ratio (Loom / llama.cpp, limit 1.0) and each
process's peak resident memory.

  python3 scripts/bench_kv_memory.py                        # default model, 4 x 8192 tokens
  python3 scripts/bench_kv_memory.py --peer-bin DIR --llama-arg=--no-repack

The peer is llama.cpp from the llama-cpp-python 0.3.36 sdist, built by scripts/bench_vs_llama_cpp.py
into its peer cache (or --peer-bin).
"""
import argparse
import concurrent.futures
import json
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_vs_llama_cpp as peer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def log(msg):
    print(f"[bench-kv-memory] {msg}", file=sys.stderr, flush=True)


def post(url, body, timeout=900):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read())


def peak_rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_requests(url, prompts, watch=None):
    """All prompts at once; returns the completions' usage. `watch` is polled meanwhile."""
    stop = threading.Event()
    watcher = threading.Thread(target=lambda: [watch() for _ in iter(lambda: stop.wait(0.2), True)]) if watch else None
    if watcher:
        watcher.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            futures = [pool.submit(post, url + "/v1/completions",
                                   {"prompt": p, "max_tokens": 8, "temperature": 0, "ignore_eos": True}) for p in prompts]
            return [f.result()["usage"] for f in futures]
    finally:
        stop.set()
        if watcher:
            watcher.join()


class Server:
    def __init__(self, cmd, name):
        self.name = name
        self.log_file = tempfile.NamedTemporaryFile(prefix=name + "-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=self.log_file)

    def text(self):
        return Path(self.log_file.name).read_text(errors="replace")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="GGUF file (default: the default model)")
    parser.add_argument("--seqs", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--loom", default=str(ROOT / "build" / "bin" / "loom"))
    parser.add_argument("--peer-bin", default=None, help="folder with llama-server (default: the peer cache)")
    parser.add_argument("--peer-cache", default=str(Path.home() / ".cache" / "loom" / "llama.cpp-0.3.36"))
    parser.add_argument("--llama-arg", action="append", default=[], help="extra llama-server argument (repeatable)")
    args = parser.parse_args()
    model = args.model or (Path.home() / ".cache" / "loom" / "default-model.txt").read_text().strip()
    bin_dir = Path(args.peer_bin) if args.peer_bin else (peer.peer_binaries(Path(args.peer_cache)) or
                                                         peer.build_peer(Path(args.peer_cache)))
    rng = random.Random(35)
    prompts = [[2] + [rng.randrange(1000, 20000) for _ in range(args.tokens - 17)] for _ in range(args.seqs)]

    port = peer.free_port()
    url = f"http://127.0.0.1:{port}"
    llama = Server([str(bin_dir / "llama-server"), "-m", model, "-t", str(args.threads), "-tb", str(args.threads),
                    "-c", str(args.seqs * args.tokens), "-np", str(args.seqs), "--port", str(port), "--no-webui", "-v",
                    *args.llama_arg], "llama-server")
    try:
        peer.wait_healthy(url, llama.proc)
        # The context the server keeps is the last one constructed (an earlier one measures the fit).
        kept = llama.text().split("llama_context: constructing llama_context")[-1]
        sizes = [float(m) for m in re.findall(r"llama_kv_cache: size =\s*([\d.]+) MiB", kept)]
        if not sizes:
            raise RuntimeError("llama-server printed no KV cache size:\n" + llama.text()[-2000:])
        llama_kv = sum(sizes)
        log(f"llama-server KV cache: {' + '.join(f'{s:.2f}' for s in sizes)} = {llama_kv:.2f} MiB; running the requests")
        start = time.time()
        llama_usage = run_requests(url, prompts)
        llama_seconds = time.time() - start
        llama_rss = peak_rss_mib(llama.proc.pid)
    finally:
        llama.stop()

    port = peer.free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as config:
        config.write(f'[backend]\nthreads = {args.threads}\n\n[model]\nn_ctx = {args.tokens}\n\n'
                     f'[kv]\nmemory = {int(llama_kv * 2**20)}\nwindow_seqs = {args.seqs}\nstate_checkpoints = 0\n\n'
                     f'[scheduler]\nmax_num_seqs = {args.seqs}\n')
    loom = Server([args.loom, "serve", "--config", config.name, "--model", model, "--port", str(port)], "loom")
    most_running = [0]

    def watch():
        with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("loom_num_requests_running "):
                    most_running[0] = max(most_running[0], int(float(line.split()[1])))

    try:
        peer.wait_healthy(url, loom.proc)
        match = re.search(r"KV cache (\d+) tokens in .*?, ([\d.]+) MiB;", loom.text())
        if not match:
            raise RuntimeError("loom serve printed no KV cache size:\n" + loom.text()[-2000:])
        loom_kv = float(match.group(2))
        log(f"loom KV cache: {loom_kv:.2f} MiB ({match.group(0)}); running the requests")
        start = time.time()
        loom_usage = run_requests(url, prompts, watch)
        loom_seconds = time.time() - start
        loom_rss = peak_rss_mib(loom.proc.pid)
    finally:
        loom.stop()

    for who, usage in (("llama-server", llama_usage), ("loom", loom_usage)):
        answered = sum(1 for u in usage if u["completion_tokens"] == 8)
        if answered != args.seqs:
            raise RuntimeError(f"{who}: {answered} of {args.seqs} requests generated their 8 tokens: {usage}")
    if most_running[0] < args.seqs:
        raise RuntimeError(f"loom ran at most {most_running[0]} of the {args.seqs} sequences at once")
    print(f"{args.seqs} sequences of {args.tokens} tokens ({args.tokens - 16} prompt + 8 generated), {Path(model).name}, "
          f"{args.threads} threads")
    print(f"  KV cache     llama-server {llama_kv:8.2f} MiB   loom {loom_kv:8.2f} MiB   ratio {loom_kv / llama_kv:.3f} (limit 1.0)")
    print(f"  peak RSS     llama-server {llama_rss:8.1f} MiB   loom {loom_rss:8.1f} MiB")
    print(f"  wall time    llama-server {llama_seconds:8.1f} s     loom {loom_seconds:8.1f} s     "
          f"(loom ran {most_running[0]} at once)")
    return 0 if loom_kv <= llama_kv else 1


if __name__ == "__main__":
    sys.exit(main())
