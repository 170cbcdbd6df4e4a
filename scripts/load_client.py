#!/usr/bin/env python3
"""Streaming load against any OpenAI-compatible server (Loom, llama-server, vLLM), one JSON line out.

  python3 scripts/load_client.py --url http://127.0.0.1:8080 --concurrency 16 --requests 48 --max-tokens 128

Sends --requests streaming POST /v1/completions, at most --concurrency in flight, each with its own
prompt (distinct first words, so no server answers one from another's prefix cache), temperature 0 and
ignore_eos, so every request generates exactly --max-tokens tokens on every server. Measures per
request the time to the first streamed token (TTFT) and the mean time per later token (TPOT), and over
the run the output tokens per second. The same client drives every server a comparison runs.

--long-prompt-words N: once every stream has its first token, one more request arrives with an
N-word prompt (about N tokens). Reported: its TTFT, and the gaps between the running streams'
tokens while it was being prefilled (p50 / p99 / max): what a long prompt costs the users already
being served.
"""
import argparse
import asyncio
import json
import statistics
import sys
import time

import aiohttp

WORDS = ("river garden window silver planet morning engine harbor violin meadow lantern canyon "
         "pepper marble orbit thunder velvet castle bridge falcon").split()


def prompt_for(i, words):
    # A distinct opening per request, then filler to the requested length (about one token per word).
    head = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(4))
    body = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(max(words - 4, 0)))
    return f"Request {i}: {head}. {body}"


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


async def one_request(session, args, i, results, prompt_words=None, max_tokens=None, first_token=None):
    body = {"model": args.model, "prompt": prompt_for(i, prompt_words or args.prompt_words), "max_tokens": max_tokens or args.max_tokens,
            "temperature": 0, "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    first = last = None
    times = []
    chunks = 0
    usage_tokens = None
    error = None
    try:
        async with session.post(args.url + "/v1/completions", json=body) as resp:
            if resp.status != 200:
                error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
            else:
                async for raw in resp.content:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    event = json.loads(data)
                    if event.get("usage"):
                        usage_tokens = event["usage"].get("completion_tokens")
                    for choice in event.get("choices") or []:
                        if choice.get("text"):
                            now = time.perf_counter()
                            if first is None and first_token is not None:
                                first_token.set()
                            first = first or now
                            last = now
                            times.append(now)
                            chunks += 1
    except (aiohttp.ClientError, asyncio.TimeoutError, json.JSONDecodeError) as e:
        error = f"{type(e).__name__}: {e}"
    tokens = usage_tokens if usage_tokens else chunks
    results.append({"ok": error is None and first is not None, "error": error, "tokens": tokens,
                    "start": start, "times": times, "ttft": (first - start) if first else None,
                    "tpot": (last - first) / (tokens - 1) if first and tokens > 1 else None})


async def run(args):
    results = []
    queue = asyncio.Queue()
    for i in range(args.requests):
        queue.put_nowait(i)
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    # A fresh connection per request: llama-server closes a streamed response's connection, and a
    # reused one fails on the next write. The same for every server keeps the comparison fair.
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        if not args.model:
            async with session.get(args.url + "/v1/models") as resp:
                args.model = (await resp.json())["data"][0]["id"]
        async def worker():
            while not queue.empty():
                i = queue.get_nowait()
                await one_request(session, args, args.seed_offset + i, results)
        long_results = []

        async def long_prompt(started):
            # After every stream has produced its first token, so all of them are decoding.
            await asyncio.gather(*(e.wait() for e in started))
            await one_request(session, args, 10**6 + args.seed_offset, long_results, prompt_words=args.long_prompt_words, max_tokens=2)

        started = [asyncio.Event() for _ in range(args.concurrency)]

        async def first_stream(k):
            # The first request of each worker flags its first token; later ones run as usual.
            i = queue.get_nowait()
            await one_request(session, args, args.seed_offset + i, results, first_token=started[k])
            started[k].set()  # also when it failed: never wait forever
            await worker()

        start = time.perf_counter()
        if args.long_prompt_words:
            await asyncio.gather(long_prompt(started), *(first_stream(k) for k in range(min(args.concurrency, args.requests))))
        else:
            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        wall = time.perf_counter() - start
    ok = [r for r in results if r["ok"]]
    long_report = None
    if args.long_prompt_words:
        lr = long_results[0] if long_results else None
        if lr is None or not lr["ok"]:
            return {"completed": 0, "requests": args.requests, "errors": [lr["error"] if lr else "long prompt not sent"]}
        window = (lr["start"], lr["start"] + lr["ttft"])
        # Gaps between consecutive tokens of the running streams that end while the long prompt was prefilled.
        gaps = [b - a for r in ok for a, b in zip(r["times"], r["times"][1:]) if window[0] < b <= window[1] + 1e-3]
        long_report = {"prompt_words": args.long_prompt_words, "ttft_s": lr["ttft"], "stream_gaps": len(gaps),
                       "stream_gap_s": {"p50": percentile(gaps, 50), "p99": percentile(gaps, 99), "max": max(gaps) if gaps else None}}
    ttft = [r["ttft"] for r in ok]
    tpot = [r["tpot"] for r in ok if r["tpot"] is not None]
    return {
        "concurrency": args.concurrency, "requests": args.requests, "completed": len(ok),
        "errors": sorted({r["error"] for r in results if r["error"]})[:5],
        "max_tokens": args.max_tokens, "output_tokens": sum(r["tokens"] for r in ok), "wall_s": wall,
        "output_tokens_per_s": sum(r["tokens"] for r in ok) / wall if wall > 0 else None,
        "ttft_s": {"p50": percentile(ttft, 50), "p99": percentile(ttft, 99), "mean": statistics.fmean(ttft) if ttft else None},
        "tpot_s": {"p50": percentile(tpot, 50), "p99": percentile(tpot, 99), "mean": statistics.fmean(tpot) if tpot else None},
        "long_prompt": long_report,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--model", help="model name sent in requests (default: the first of GET /v1/models)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompt-words", type=int, default=32, help="prompt length in words (about as many tokens)")
    parser.add_argument("--seed-offset", type=int, default=0, help="first request index (distinct prompts per run)")
    parser.add_argument("--long-prompt-words", type=int, default=0, help="one long prompt arriving mid-run (see above)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    if args.concurrency < 1 or args.requests < 1 or args.max_tokens < 1:
        parser.error("--concurrency, --requests and --max-tokens must be >= 1")
    report = asyncio.run(run(args))
    print(json.dumps(report))
    if report["completed"] != args.requests:
        print(f"load_client: {args.requests - report['completed']} of {args.requests} requests failed: {report['errors']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
