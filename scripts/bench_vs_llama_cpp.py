#!/usr/bin/env python3
"""Loom against llama.cpp on one GGUF file and thread count, alternating, in one run: one table of
ratios and a JSON report. Entry point: scripts/bench_vs_llama_cpp.sh (same arguments).

Peer: llama.cpp as vendored by the llama-cpp-python 0.3.36 sdist on PyPI (2026-10). Its llama-bench,
llama-batched-bench and llama-server are built once into --peer-cache (about 7 minutes on 2 cores) and
reused by later runs.

Measured, each round running Loom then llama.cpp (or the reverse on odd rounds):
  tg / pp        `loom bench` vs llama-bench: decode of --tg tokens, prefill of --pp tokens
  batch N        decode tokens/s of N sequences at once (16-token prompts): `loom bench --batch` vs
                 llama-batched-bench (S_TG)
  serving c=N    `loom serve` vs `llama-server -np 16`, driven by the same client (scripts/load_client.py):
                 3N streaming requests (at least 4) of --serving-tokens tokens at concurrency N: output
                 tokens/s, TTFT and TPOT p50/p99
  long prompt    4 streams decoding when a --long-prompt-words prompt (about that many tokens) arrives:
                 its TTFT, and the gaps between the streams' tokens while it is prefilled (p99, max)
Ratios are Loom / llama.cpp of the medians over rounds (for TTFT and TPOT, lower is better: a ratio
below 1 means Loom is faster).

  bash scripts/bench_vs_llama_cpp.sh                       # default model, 2 threads, 2 rounds
  bash scripts/bench_vs_llama_cpp.sh --model Q.gguf --json q.json
  bash scripts/bench_vs_llama_cpp.sh --quick --peer none   # seconds: Loom only (what CTest runs)
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDIST = "llama_cpp_python-0.3.36.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
PEER_TOOLS = ("llama-bench", "llama-batched-bench", "llama-server")
SCHEMA = "loom-bench-vs-llama-cpp/1"


def log(msg):
    print(f"[bench-vs-llama.cpp] {msg}", file=sys.stderr, flush=True)


# ---- the peer's binaries ----------------------------------------------------------------------------

def peer_binaries(cache):
    bin_dir = cache / "build" / "bin"
    return bin_dir if all((bin_dir / t).exists() for t in PEER_TOOLS) else None


def build_peer(cache, without_amx=False):
    """Downloads the pinned sdist (pip, hash-checked), builds the three tools into cache/build;
    without_amx: for the native instruction set less AMX (see peer_runs)."""
    cache.mkdir(parents=True, exist_ok=True)
    src = cache / "src" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
    if not src.exists():
        with tempfile.TemporaryDirectory() as tmp:
            log("downloading the llama-cpp-python 0.3.36 sdist from PyPI")
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                            "--no-binary", ":all:", "llama-cpp-python==0.3.36", "-d", tmp], check=True)
            archive = Path(tmp) / SDIST
            digest = hashlib.sha256(archive.read_bytes()).hexdigest()
            if digest != SDIST_SHA256:
                raise RuntimeError(f"{SDIST}: sha256 {digest}, expected {SDIST_SHA256}")
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name]
                tar.extractall(cache / "src", members=members, filter="data")
    log(f"building {', '.join(PEER_TOOLS)} (cached in {cache}; minutes the first time)")
    native_flags = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" if without_amx else ""
    subprocess.run(["cmake", "-S", str(src), "-B", str(cache / "build"), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF",
                    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
                    f"-DCMAKE_C_FLAGS={native_flags}", f"-DCMAKE_CXX_FLAGS={native_flags}"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(cache / "build"), "-j", str(os.cpu_count() or 2), "--target", *PEER_TOOLS],
                   check=True, stdout=subprocess.DEVNULL)
    return peer_binaries(cache)


def peer_runs(bin_dir, model):
    """False when llama-bench dies by a signal on a tiny run of the model (a build the CPU cannot run)."""
    proc = subprocess.run([str(bin_dir / "llama-bench"), "-m", model, "-t", "2", "-p", "8", "-n", "1", "-r", "1"],
                          capture_output=True, text=True)
    return proc.returncode >= 0


# ---- micro-benchmarks -------------------------------------------------------------------------------

def run_json(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return proc.stdout


def loom_micro(args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_json([args.loom, "bench", "--model", args.model, "--threads", str(args.threads), "--pp", str(args.pp),
                  "--tg", str(args.tg), "--rounds", "1", "--batch", ",".join(map(str, args.batches)),
                  "--reference-tokens", "0", "--no-grammar", "--json", out.name], "loom bench")
        report = json.loads(Path(out.name).read_text())
    result = {"tg": report["tg"]["tokens_per_s"], "pp": report["pp"]["tokens_per_s"]}
    for b in report["batched_decode"]:
        result[f"batch_{b['batch']}"] = b["decode_tokens_per_s"]
        if "moe" in b:  # the backend's count of expert matrices read per MoE matmul
            result.setdefault("moe", {})[str(b["batch"])] = b["moe"]
    return result


def peer_micro(args, bin_dir):
    result = {}
    out = run_json([str(bin_dir / "llama-bench"), "-m", args.model, "-t", str(args.threads), "-p", str(args.pp),
                    "-n", str(args.tg), "-r", "1", "-o", "json"], "llama-bench")
    for row in json.loads(out):
        result["pp" if row["n_prompt"] > 0 else "tg"] = row["avg_ts"]
    ctx = max(args.batches) * (16 + args.tg) + 64
    missing = list(args.batches)
    # llama-batched-bench prints its results through llama.cpp's asynchronous logger, which now and
    # then loses the last line at exit: run the batch sizes still missing again (at most 3 times).
    for _ in range(3):
        out = run_json([str(bin_dir / "llama-batched-bench"), "-m", args.model, "-t", str(args.threads), "-tb", str(args.threads),
                        "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", "16", "-ntg", str(args.tg),
                        "-npl", ",".join(map(str, missing)), "--output-format", "jsonl"], "llama-batched-bench")
        # One JSON object per batch size, found anywhere in the output (log lines may share its stream).
        for match in re.finditer(r'\{[^{}]*"speed_tg"[^{}]*\}', out):
            row = json.loads(match.group(0))
            result[f"batch_{row['pl']}"] = row["speed_tg"]
        missing = [b for b in args.batches if f"batch_{b}" not in result]
        if not missing:
            return result
    raise RuntimeError(f"llama-batched-bench printed no result for batch {missing}: {out[-800:]}")


# ---- serving ----------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url, proc, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url}/health not ready after {seconds} s")


def serve_and_load(args, who, bin_dir, round_index):
    port = free_port()
    slots = max(args.concurrency + [4])
    # Room for the prompt however the vocabulary splits its words (a synthetic one spells them out).
    ctx_per_slot = max(512, 8 * args.serving_prompt_words + args.serving_tokens + 64, 2 * args.long_prompt_words + 64)
    if who == "loom":
        cmd = [args.loom, "serve", "--model", args.model, "--threads", str(args.threads), "--port", str(port),
               "--n-ctx", str(ctx_per_slot)]
    else:
        cmd = [str(bin_dir / "llama-server"), "-m", args.model, "-t", str(args.threads), "-tb", str(args.threads),
               "-np", str(slots), "-c", str(slots * ctx_per_slot), "--port", str(port), "--no-webui"]
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as server_log:
        proc = subprocess.Popen(cmd, stdout=server_log, stderr=server_log)
        try:
            wait_healthy(url, proc)
            results = {}
            for c in args.concurrency:
                n = max(4, 3 * c) if not args.quick else max(2, c)
                out = run_json([sys.executable, str(ROOT / "scripts" / "load_client.py"), "--url", url, "--concurrency", str(c),
                                "--requests", str(n), "--max-tokens", str(args.serving_tokens),
                                "--prompt-words", str(args.serving_prompt_words),
                                "--seed-offset", str(1000 * round_index + 100 * c)], f"load client against {who}")
                results[f"c{c}"] = json.loads(out)
            if args.long_prompt_words:
                out = run_json([sys.executable, str(ROOT / "scripts" / "load_client.py"), "--url", url, "--concurrency", "4",
                                "--requests", "4", "--max-tokens", str(args.long_prompt_stream_tokens),
                                "--prompt-words", str(args.serving_prompt_words), "--long-prompt-words", str(args.long_prompt_words),
                                "--seed-offset", str(1000 * round_index + 999)], f"long-prompt load against {who}")
                results["long_prompt"] = json.loads(out)["long_prompt"]
            return results
        except Exception:
            server_log.seek(0)
            log(f"{who} server output:\n" + server_log.read().decode(errors="replace")[-2000:])
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


# ---- report -----------------------------------------------------------------------------------------

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def machine():
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        flags = Path("/proc/cpuinfo").read_text()
        simd = "avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "other"
    except OSError:
        simd = "unknown"
    return {"cpu": cpu, "cores": os.cpu_count(), "simd": simd, "system": platform.platform()}


def summarize(args, rounds, peer_info):
    report = {"schema": SCHEMA, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine(), "threads": args.threads, "model": str(Path(args.model).resolve()),
              "peer": peer_info, "rounds": len(rounds),
              "settings": {"pp": args.pp, "tg": args.tg, "batches": args.batches, "concurrency": args.concurrency,
                           "serving_tokens": args.serving_tokens, "serving_prompt_words": args.serving_prompt_words,
                           "long_prompt_words": args.long_prompt_words},
              "micro": {}, "serving": {}}
    metrics = [] if args.no_micro else ["tg", "pp"] + [f"batch_{b}" for b in args.batches]
    for m in metrics:
        loom = [r["loom"]["micro"].get(m) for r in rounds]
        peer = [r["llama_cpp"]["micro"].get(m) for r in rounds if r.get("llama_cpp")]
        report["micro"][m] = {"unit": "tokens/s", "loom": loom, "llama_cpp": peer or None,
                              "loom_median": median(loom), "llama_cpp_median": median(peer),
                              "ratio": ratio(median(loom), median(peer))}
    moe = [r["loom"]["micro"]["moe"] for r in rounds if "moe" in r["loom"]["micro"]]
    if moe:
        report["loom_moe_reads"] = moe[-1]
    b1, bmax = report["micro"].get("batch_1"), report["micro"].get(f"batch_{max(args.batches)}")
    if b1 and bmax:
        report["loom_batch_scaling"] = ratio(bmax["loom_median"], b1["loom_median"])
        report["llama_cpp_batch_scaling"] = ratio(bmax["llama_cpp_median"], b1["llama_cpp_median"])
    for c in args.concurrency:
        key = f"c{c}"
        entry = {}
        for who in ("loom", "llama_cpp"):
            runs = [r[who]["serving"][key] for r in rounds if r.get(who)]
            if not runs:
                entry[who] = None
                continue
            entry[who] = {"runs": runs,
                          "output_tokens_per_s": median([x["output_tokens_per_s"] for x in runs]),
                          "ttft_p50_s": median([x["ttft_s"]["p50"] for x in runs]),
                          "ttft_p99_s": median([x["ttft_s"]["p99"] for x in runs]),
                          "tpot_p50_s": median([x["tpot_s"]["p50"] for x in runs]),
                          "tpot_p99_s": median([x["tpot_s"]["p99"] for x in runs]),
                          "completed": sum(x["completed"] for x in runs), "requests": sum(x["requests"] for x in runs)}
        loom, peer = entry["loom"], entry["llama_cpp"]
        for field in ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
            entry[f"ratio_{field}"] = ratio(loom[field], peer[field]) if loom and peer else None
        report["serving"][key] = entry
    if args.long_prompt_words:
        entry = {"prompt_words": args.long_prompt_words}
        for who in ("loom", "llama_cpp"):
            runs = [r[who]["serving"]["long_prompt"] for r in rounds if r.get(who) and r[who]["serving"].get("long_prompt")]
            entry[who] = {"runs": runs, "ttft_s": median([x["ttft_s"] for x in runs]),
                          "stream_gap_p99_s": median([x["stream_gap_s"]["p99"] for x in runs]),
                          "stream_gap_max_s": median([x["stream_gap_s"]["max"] for x in runs])} if runs else None
        for field in ("ttft_s", "stream_gap_p99_s", "stream_gap_max_s"):
            entry[f"ratio_{field}"] = ratio(entry["loom"][field], entry["llama_cpp"][field]) if entry["loom"] and entry["llama_cpp"] else None
        report["long_prompt"] = entry
    return report


def fmt(v, unit=""):
    if v is None:
        return "-"
    return f"{v * 1000:.0f} ms" if unit == "s" else f"{v:.1f}"


def print_table(report):
    rows = [("metric", "Loom", "llama.cpp", "Loom/llama.cpp")]
    for m, e in report["micro"].items():
        rows.append((f"{m} tok/s", fmt(e["loom_median"]), fmt(e["llama_cpp_median"]), fmt(e["ratio"]) if e["ratio"] else "-"))
    for key, e in report["serving"].items():
        l, p = e["loom"] or {}, e["llama_cpp"] or {}
        rows.append((f"serve {key} output tok/s", fmt(l.get("output_tokens_per_s")), fmt(p.get("output_tokens_per_s")),
                     f"{e['ratio_output_tokens_per_s']:.2f}" if e["ratio_output_tokens_per_s"] else "-"))
        for field, label in (("ttft_p50_s", "TTFT p50"), ("ttft_p99_s", "TTFT p99"), ("tpot_p50_s", "TPOT p50"), ("tpot_p99_s", "TPOT p99")):
            r = e[f"ratio_{field}"]
            rows.append((f"serve {key} {label}", fmt(l.get(field), "s"), fmt(p.get(field), "s"), f"{r:.2f}" if r else "-"))
    lp = report.get("long_prompt")
    if lp:
        l, p = lp["loom"] or {}, lp["llama_cpp"] or {}
        for field, label in (("ttft_s", "TTFT"), ("stream_gap_p99_s", "streams' token gap p99"), ("stream_gap_max_s", "streams' token gap max")):
            r = lp[f"ratio_{field}"]
            rows.append((f"{lp['prompt_words']}-word prompt: {label}", fmt(l.get(field), "s"), fmt(p.get(field), "s"), f"{r:.2f}" if r else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    m = report["machine"]
    print(f"{report['date']}  {m['cpu']} ({m['cores']} cores, {m['simd']}), {report['threads']} threads, "
          f"{Path(report['model']).name}, {report['rounds']} round(s)")
    for r in rows:
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
    if report.get("loom_batch_scaling"):
        peer = report.get("llama_cpp_batch_scaling")
        print(f"batch scaling (largest batch / batch 1): Loom {report['loom_batch_scaling']:.2f}x"
              + (f", llama.cpp {peer:.2f}x" if peer else ""))
    for batch, m in (report.get("loom_moe_reads") or {}).items():
        print(f"Loom batch {batch}: {m['expert_reads_per_matmul']:.2f} expert matrices read per MoE matmul for "
              f"{m['rows_per_matmul']:.1f} token-expert rows ({m['rows_per_expert_read']:.2f} rows per read; counted by the backend)")


def default_model():
    env = os.environ.get("LOOM_MODEL")
    if env:
        return env
    recorded = Path.home() / ".cache" / "loom" / "default-model.txt"
    return recorded.read_text().strip() if recorded.exists() else None


def int_list(text):
    if text == "none":
        return []
    values = [int(v) for v in text.split(",") if v]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive integers")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=default_model())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of Loom and llama.cpp")
    parser.add_argument("--json", default="bench-vs-llama-cpp.json", help="report file")
    parser.add_argument("--loom", default=str(ROOT / "build" / "bin" / "loom"))
    parser.add_argument("--peer", choices=("build", "cached", "none"), default="build",
                        help="build: build llama.cpp when not cached; cached: use it only if already built; none: Loom only")
    parser.add_argument("--peer-cache", default=str(Path.home() / ".cache" / "loom" / "llama.cpp-0.3.36"))
    parser.add_argument("--pp", type=int, default=512)
    parser.add_argument("--tg", type=int, default=128)
    parser.add_argument("--batches", type=int_list, default=[1, 4, 16])
    parser.add_argument("--concurrency", type=int_list, default=[1, 4, 16], help="serving levels ('none': only the long-prompt scenario)")
    parser.add_argument("--no-micro", action="store_true", help="skip tg / pp / batched decode (serving only)")
    parser.add_argument("--serving-tokens", type=int, default=128)
    parser.add_argument("--serving-prompt-words", type=int, default=32)
    parser.add_argument("--long-prompt-words", type=int, default=4000,
                        help="the long prompt that arrives while 4 streams decode (0 skips the scenario)")
    parser.add_argument("--long-prompt-stream-tokens", type=int, default=512, help="tokens each of those streams generates")
    parser.add_argument("--no-serving", action="store_true", help="skip the serving comparison")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (pp 32, tg 8, 8-token answers): checks the pipeline, not speed")
    parser.add_argument("--synthetic-moe", metavar="DIR",
                        help="write the README's synthetic mixture-of-experts model (qwen3moe, 8 layers, 8 experts, top-2, "
                             "Q8_0) into DIR and compare on it, micro-benchmarks only")
    parser.add_argument("--synthetic-moe-dim", type=int, default=2048,
                        help="its model and expert FFN width: 2048 (the default) writes 948 MB, larger than the "
                             "development machine's 480 MB L3, as every real MoE model is; 1024 writes 226 MB, which "
                             "batch-1 decode partly reads from the L3")
    args = parser.parse_args()
    if args.synthetic_moe:
        Path(args.synthetic_moe).mkdir(parents=True, exist_ok=True)
        dim = args.synthetic_moe_dim
        args.model = str(Path(args.synthetic_moe) / f"qwen3moe-8x{dim}-top2-q8_0.gguf")
        subprocess.run([args.loom, "gguf", "synth", "--arch", "qwen3moe", "--layers", "8", "--dim", str(dim), "--heads", "16",
                        "--kv-heads", "4", "--ff", "2816", "--vocab", "512", "--ctx", "2048", "--seed", "5", "--type", "Q8_0",
                        "--experts", "8", "--experts-used", "2", "--expert-ff", str(dim), "-o", args.model],
                       check=True, stdout=subprocess.DEVNULL)
        args.no_serving = True  # a 512-token synthetic vocabulary: serving text would mean nothing
    if args.quick:
        args.pp, args.tg, args.serving_tokens, args.serving_prompt_words = 32, 8, 8, 8
        args.long_prompt_words, args.long_prompt_stream_tokens = min(args.long_prompt_words, 16), 32
        args.batches = [b for b in args.batches if b <= 4] or [1]
        args.concurrency = [c for c in args.concurrency if c <= 4] or ([1] if args.concurrency else [])
    if args.no_serving:
        args.concurrency = []
        args.long_prompt_words = 0
    if not args.model or not Path(args.model).exists():
        parser.error(f"model not found: {args.model!r} (run scripts/setup.sh or pass --model)")
    if not Path(args.loom).exists():
        parser.error(f"loom binary not found at {args.loom} (build first: bash scripts/test.sh, or pass --loom)")

    cache = Path(args.peer_cache)
    bin_dir = None
    peer_info = {"name": "llama.cpp", "source": "llama-cpp-python 0.3.36 sdist (vendor/llama.cpp)", "binaries": None, "skipped": None}
    if args.peer == "none":
        peer_info["skipped"] = "--peer none"
    else:
        bin_dir = peer_binaries(cache)
        if bin_dir is None and args.peer == "build":
            bin_dir = build_peer(cache)
        if bin_dir is not None and not peer_runs(bin_dir, args.model) and args.peer == "build":
            # ggml's AMX matmul (compiled in by -march=native where cpuinfo lists AMX) crashed at its
            # first tile instruction on a Xeon VM whose AMX otherwise works: rebuild without it.
            log("llama-bench crashed on this model; rebuilding llama.cpp without AMX")
            peer_info["note"] = "built without AMX: the native build crashed in ggml's AMX matmul"
            bin_dir = build_peer(cache, without_amx=True)
            if not peer_runs(bin_dir, args.model):
                bin_dir = None
                peer_info["skipped"] = "llama-bench crashes on this model even without AMX"
        if bin_dir is None and not peer_info["skipped"]:
            peer_info["skipped"] = f"no llama.cpp build in {cache} (--peer cached)"
        elif bin_dir is not None:
            peer_info["binaries"] = str(bin_dir)
    if peer_info["skipped"]:
        log(f"llama.cpp skipped: {peer_info['skipped']}; Loom only")

    rounds = []
    for i in range(args.rounds):
        order = ["loom", "llama_cpp"] if i % 2 == 0 else ["llama_cpp", "loom"]
        result = {}
        for who in order:
            if who == "llama_cpp" and bin_dir is None:
                continue
            micro = {}
            if not args.no_micro:
                log(f"round {i + 1}/{args.rounds}: {who} micro-benchmarks")
                micro = loom_micro(args) if who == "loom" else peer_micro(args, bin_dir)
            serving = {}
            if args.concurrency or args.long_prompt_words:
                log(f"round {i + 1}/{args.rounds}: {who} serving at concurrency {args.concurrency}"
                    + (f", then a {args.long_prompt_words}-word prompt arriving" if args.long_prompt_words else ""))
                serving = serve_and_load(args, who, bin_dir, i)
            result[who] = {"micro": micro, "serving": serving}
        rounds.append(result)

    report = summarize(args, rounds, peer_info)
    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    log(f"report written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
