#!/usr/bin/env python3
"""Scores chat models on a fixed set of prompts, to pick the default chat model (docs/models.md).

Each model is served by `loom serve` on the CPU and asked the same ten questions through
/v1/chat/completions, greedily (temperature 0, 256 tokens at most). Every prompt has a check a wrong
answer fails (a keyword, a code block); an answer that repeats a line more than 3 times or runs to
max_tokens fails too. Prints one row per model: prompts passed, mean tokens per answer, decode speed.

  python3 scripts/chat_model_eval.py --loom build/bin/loom MODEL.gguf [MODEL.gguf ...] [--json out.json]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

PROMPTS = [
    ("Write a short Python function that reverses a string, with a code block.",
     lambda a: "```" in a and ("[::-1]" in a or "reversed" in a)),
    ("What is the capital of France?", lambda a: "Paris" in a),
    ("List three primary colors.", lambda a: sum(c in a.lower() for c in ("red", "blue", "yellow", "green")) >= 3),
    ("Translate 'good morning' into Spanish.", lambda a: "buenos d" in a.lower()),
    ("What is 12 times 12?", lambda a: "144" in a),
    ("Write a SQL query that counts the rows of a table named users.",
     lambda a: re.search(r"count\s*\(\s*\*\s*\)", a, re.I) is not None and "users" in a),
    ("Explain in two sentences what a hash table is.", lambda a: "key" in a.lower()),
    ("Name the largest planet in the solar system.", lambda a: "Jupiter" in a),
    ("Give me a JSON object with the fields name and age for a person called Ada who is 36.",
     lambda a: '"name"' in a and "Ada" in a and "36" in a),
    ("How many days are there in a leap year?", lambda a: "366" in a),
]
MAX_TOKENS = 256


def repeats_a_line(answer, limit=3):
    lines = [line.strip() for line in answer.splitlines() if line.strip()]
    return any(count > limit for count in collections.Counter(lines).values())


def serve(loom, model):
    proc = subprocess.Popen([loom, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    box = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)
    match = re.search(r"listening on (http://[\d.]+:\d+)", box[0] if box else "")
    if not match:
        proc.kill()
        sys.exit(f"loom serve did not start on {model}")
    return proc, match.group(1)


def ask(base, prompt):
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS, "temperature": 0}
    request = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.monotonic()
    with urllib.request.urlopen(request, timeout=600) as response:
        reply = json.load(response)
    seconds = time.monotonic() - start
    choice = reply["choices"][0]
    return choice["message"]["content"] or "", choice["finish_reason"], reply["usage"]["completion_tokens"], seconds


def evaluate(loom, model):
    proc, base = serve(loom, model)
    rows = []
    try:
        for prompt, check in PROMPTS:
            answer, finish, tokens, seconds = ask(base, prompt)
            passed = check(answer) and not repeats_a_line(answer) and finish == "stop"
            rows.append({"prompt": prompt, "answer": answer, "finish_reason": finish, "tokens": tokens,
                         "seconds": seconds, "passed": passed})
    finally:
        proc.terminate()
        proc.wait(30)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loom", default="build/bin/loom")
    ap.add_argument("--json", help="write every answer here")
    ap.add_argument("--verbose", action="store_true", help="print every answer")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    results = {}
    print(f"{'model':48} {'passed':>7} {'tokens/answer':>14} {'tok/s':>7}")
    for model in args.models:
        rows = evaluate(args.loom, model)
        results[model] = rows
        tokens = sum(r["tokens"] for r in rows)
        seconds = sum(r["seconds"] for r in rows)
        passed = sum(r["passed"] for r in rows)
        print(f"{os.path.basename(model)[:48]:48} {passed:>4}/{len(rows):<2} {tokens / len(rows):>14.0f} "
              f"{tokens / seconds:>7.1f}")
        if args.verbose:
            for r in rows:
                mark = "PASS" if r["passed"] else "FAIL"
                print(f"  [{mark}] {r['prompt']}\n    -> {r['answer'][:300]!r} ({r['finish_reason']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
