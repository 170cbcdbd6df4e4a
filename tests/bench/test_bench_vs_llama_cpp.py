#!/usr/bin/env python3
"""bench.vs_llama_cpp_json: runs the comparison script in --quick mode on a synthetic model and checks
its JSON report: the schema, the machine, one value per round for every metric, positive speeds, every
request answered, and ratios exactly where both sides ran."""
import argparse
import json
import math
import subprocess
import sys
from pathlib import Path


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def positive(v, where):
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        fail(f"{where} = {v!r}, expected a positive number")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    model = work / "bench-tiny.gguf"
    subprocess.run([args.loom, "gguf", "synth", "--arch", "llama", "--layers", "2", "--dim", "64", "--heads", "4",
                    "--kv-heads", "2", "--ff", "128", "--vocab", "512", "-o", str(model)], check=True, stdout=subprocess.DEVNULL)
    report_path = work / "bench-vs-llama-cpp-quick.json"
    proc = subprocess.run(["bash", args.script, "--quick", "--peer", "cached", "--rounds", "2", "--model", str(model),
                           "--loom", args.loom, "--json", str(report_path)], capture_output=True, text=True, timeout=540)
    print(proc.stdout)
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        fail(f"script exited with {proc.returncode}")
    report = json.loads(report_path.read_text())

    if report.get("schema") != "loom-bench-vs-llama-cpp/1":
        fail(f"schema {report.get('schema')!r}")
    for key in ("cpu", "cores", "simd"):
        if not report["machine"].get(key):
            fail(f"machine.{key} missing")
    if report["rounds"] != 2 or report["threads"] != 2:
        fail(f"rounds {report['rounds']}, threads {report['threads']}")
    peer_ran = report["peer"]["binaries"] is not None
    if peer_ran == bool(report["peer"]["skipped"]):
        fail("peer must be either run (binaries) or skipped with a reason")
    expected = {"tg", "pp", "batch_1", "batch_4"}
    if set(report["micro"]) != expected:
        fail(f"micro metrics {sorted(report['micro'])}, expected {sorted(expected)}")
    for name, m in report["micro"].items():
        if len(m["loom"]) != 2:
            fail(f"micro.{name}.loom has {len(m['loom'])} values, expected one per round")
        for i, v in enumerate(m["loom"]):
            positive(v, f"micro.{name}.loom[{i}]")
        positive(m["loom_median"], f"micro.{name}.loom_median")
        if peer_ran:
            for i, v in enumerate(m["llama_cpp"]):
                positive(v, f"micro.{name}.llama_cpp[{i}]")
            positive(m["ratio"], f"micro.{name}.ratio")
            if abs(m["ratio"] - m["loom_median"] / m["llama_cpp_median"]) > 1e-9:
                fail(f"micro.{name}.ratio is not loom_median / llama_cpp_median")
        elif m["ratio"] is not None or m["llama_cpp"] is not None:
            fail(f"micro.{name} has peer figures but the peer was skipped")
    positive(report["loom_batch_scaling"], "loom_batch_scaling")
    if set(report["serving"]) != {"c1", "c4"}:
        fail(f"serving levels {sorted(report['serving'])}")
    for level, s in report["serving"].items():
        sides = ["loom", "llama_cpp"] if peer_ran else ["loom"]
        for who in sides:
            e = s[who]
            if e["completed"] != e["requests"] or e["requests"] < 2:
                fail(f"serving.{level}.{who}: {e['completed']} of {e['requests']} requests answered")
            for field in ("output_tokens_per_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
                positive(e[field], f"serving.{level}.{who}.{field}")
            for run in e["runs"]:
                if run["output_tokens"] != run["requests"] * run["max_tokens"]:
                    fail(f"serving.{level}.{who}: {run['output_tokens']} tokens, expected {run['requests']} x {run['max_tokens']}")
        if peer_ran:
            positive(s["ratio_output_tokens_per_s"], f"serving.{level}.ratio_output_tokens_per_s")
        elif s["llama_cpp"] is not None or s["ratio_output_tokens_per_s"] is not None:
            fail(f"serving.{level} has peer figures but the peer was skipped")
    lp = report.get("long_prompt")
    if not lp or lp["prompt_words"] != 16:
        fail(f"long_prompt scenario missing or not --quick's 16 words: {lp}")
    for who in (["loom", "llama_cpp"] if peer_ran else ["loom"]):
        positive(lp[who]["ttft_s"], f"long_prompt.{who}.ttft_s")
        if len(lp[who]["runs"]) != 2:
            fail(f"long_prompt.{who} has {len(lp[who]['runs'])} runs, expected one per round")
    print(f"ok: report {report_path} well-formed ({'with' if peer_ran else 'without'} llama.cpp: "
          f"{report['peer']['binaries'] or report['peer']['skipped']})")


if __name__ == "__main__":
    main()
