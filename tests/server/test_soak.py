#!/usr/bin/env python3
"""Soak: `loom serve` under a mixed, partly hostile load for a bounded time (issue 17).

32 clients for SOAK_SECONDS send streaming and non-streaming completions, abandon some of them midway
(streams after a few events, whole answers before they are ready), ask for more tokens than the
context, send malformed bodies and unknown model names. Every request a client did not abandon must be
answered (200) or refused with a JSON reason (4xx, 503); nothing may be lost (no reply, a reset, a
500). Afterwards the server must hold nothing: 0 requests running or queued, 0 KV blocks, and be alive.

usage: test_soak.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [--seconds S]
"""
import argparse
import collections
import concurrent.futures
import http.client
import json
import os
import random
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--loom", required=True)
parser.add_argument("--plugins", required=True)
parser.add_argument("--seconds", type=float, default=40.0)
parser.add_argument("--concurrency", type=int, default=32)
ARGS = parser.parse_args()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness  # noqa: E402
from server_harness import TMP, LoomServer, raw_post, synth, write_config  # noqa: E402

server_harness.configure(ARGS.loom, ARGS.plugins)
N_CTX = 512


class Client:
    """One simulated user; returns an outcome label per request."""

    def __init__(self, server, seed):
        self.server = server
        self.rng = random.Random(seed)

    def post(self, body, path="/v1/completions"):
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=60)
        try:
            payload = body if isinstance(body, str) else json.dumps(body)
            conn.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def judge(self, status, data, expect_stream=False, expected_errors=()):
        """'ok', 'refused:STATUS:CODE', or 'LOST: why' for an answer that is neither."""
        if status == 200:
            if expect_stream:
                return "ok" if data.rstrip().endswith(b"data: [DONE]") and b'"error"' not in data else \
                    f"LOST: stream without [DONE] or with an error: {data[-200:]!r}"
            body = json.loads(data)
            return "ok" if body.get("choices") else f"LOST: 200 without choices: {data[:200]!r}"
        try:
            error = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            return f"LOST: {status} without a JSON error body: {data[:200]!r}"
        if not error.get("message"):
            return f"LOST: {status} with an empty message"
        if status >= 500 and status != 503:
            return f"LOST: {status} {error['message']}"
        if status not in (429, 503) and status not in expected_errors:
            return f"LOST: unexpected {status} {error['message']}"
        return f"refused:{status}:{error.get('code') or error.get('param')}"

    def completion(self, stream):
        body = {"prompt": f"user {self.rng.randrange(1000)} asks", "max_tokens": self.rng.randint(4, 48),
                "temperature": self.rng.choice([0, 0.8]), "ignore_eos": True, "stream": stream}
        status, data = self.post(body)
        return self.judge(status, data, expect_stream=stream)

    def abandoned_stream(self):
        sock = raw_post(self.server.host, self.server.port, "/v1/completions",
                        {"prompt": "a long tale", "max_tokens": 400, "ignore_eos": True, "stream": True})
        want = self.rng.randint(1, 4)
        received = b""
        try:
            while received.count(b"data: ") < want:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                received += chunk
        finally:
            sock.close()
        return "abandoned"

    def abandoned_whole(self):
        sock = raw_post(self.server.host, self.server.port, "/v1/completions",
                        {"prompt": "an essay", "max_tokens": 400, "ignore_eos": True})
        time.sleep(self.rng.uniform(0.02, 0.4))
        sock.close()
        return "abandoned"

    def over_long(self):
        status, data = self.post({"prompt": "x", "max_tokens": 10 ** self.rng.randint(3, 9)})
        return self.judge(status, data, expected_errors=(400,))

    def bad_body(self):
        body = self.rng.choice(['{"prompt": "x", ', "not json", '{"prompt": 5}', '{"prompt": "x", "top_p": "high"}',
                                '{"messages": "hi"}', "[]"])
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        status, data = self.post(body, path)
        return self.judge(status, data, expected_errors=(400,))

    def unknown_model(self):
        status, data = self.post({"prompt": "x", "max_tokens": 2, "model": "not-this-one"})
        return self.judge(status, data, expected_errors=(404,))

    def one(self):
        actions = [(lambda: self.completion(True), 30), (lambda: self.completion(False), 30),
                   (self.abandoned_stream, 10), (self.abandoned_whole, 10), (self.over_long, 8),
                   (self.bad_body, 8), (self.unknown_model, 4)]
        action = self.rng.choices([a for a, _ in actions], weights=[w for _, w in actions])[0]
        try:
            return action()
        except (OSError, http.client.HTTPException) as e:
            return f"LOST: {type(e).__name__}: {e}"


def main():
    model = synth(os.path.join(TMP.name, "soak.gguf"), N_CTX)
    server = LoomServer(write_config("soak.toml", "max_queue = 64"), model)
    outcomes = collections.Counter()
    lost = []
    lock = threading.Lock()
    stop_at = time.perf_counter() + ARGS.seconds

    def user(seed):
        client = Client(server, seed)
        while time.perf_counter() < stop_at:
            outcome = client.one()
            with lock:
                outcomes[outcome.split(":")[0] if outcome.startswith("LOST") else outcome] += 1
                if outcome.startswith("LOST"):
                    lost.append(outcome)

    failures = []
    try:
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(ARGS.concurrency) as pool:
            list(pool.map(user, range(ARGS.concurrency)))
        wall = time.perf_counter() - start
        alive = server.proc.poll() is None
        m = server.metrics() if alive else {}
        deadline = time.time() + 15
        while alive and time.time() < deadline and (m["loom_kv_blocks_used"] or m["loom_num_requests_running"]
                                                    or m["loom_num_requests_waiting"] or m["loom_server_queue_depth"]):
            time.sleep(0.1)
            m = server.metrics()
        total = sum(outcomes.values())
        print(f"soak: {total} requests in {wall:.1f} s ({total / wall:.1f} req/s) at concurrency {ARGS.concurrency}")
        for outcome, count in sorted(outcomes.items()):
            print(f"soak:   {outcome}: {count}")
        if alive:
            cancelled = {k: v for k, v in m.items() if k.startswith("loom_requests_cancelled_total")}
            print(f"soak: server cancelled {cancelled}; afterwards running {m['loom_num_requests_running']:.0f}, "
                  f"waiting {m['loom_num_requests_waiting']:.0f}, queue {m['loom_server_queue_depth']:.0f}, "
                  f"KV blocks used {m['loom_kv_blocks_used']:.0f} of {m['loom_kv_blocks_total']:.0f}, "
                  f"connections open {m['loom_http_connections_open']:.0f}")
        if not alive:
            failures.append(f"the server died (exit {server.proc.returncode})")
        else:
            for name in ("loom_kv_blocks_used", "loom_num_requests_running", "loom_num_requests_waiting",
                         "loom_server_queue_depth"):
                if m[name] != 0:
                    failures.append(f"{name} is {m[name]:.0f} after the load, not 0")
            disconnected = m['loom_requests_cancelled_total{reason="client_disconnected"}']
            if disconnected > outcomes["abandoned"]:
                failures.append(f"{disconnected:.0f} cancellations for {outcomes['abandoned']} abandoned requests")
        if lost:
            failures.append(f"{len(lost)} requests lost, e.g. {lost[:3]}")
        for required in ("ok", "abandoned", "refused:400:max_tokens", "refused:404:model_not_found"):
            if outcomes[required] == 0:
                failures.append(f"the load never produced '{required}': the soak did not exercise it")
    finally:
        code = server.terminate()
        if code != 0:
            failures.append(f"loom serve exited {code}; stderr:\n{server.log()[-2000:]}")
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
