#!/usr/bin/env python3
"""Nothing lost, nothing leaked: `loom serve` against abandoned, over-long, misaddressed and idle
clients, and a configuration with several mistakes (issue 17). Raw sockets and http.client only.

usage: test_robustness.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import http.client
import json
import os
import re
import resource
import socket
import statistics
import sys
import time
import unittest


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness  # noqa: E402
from server_harness import TMP, LoomServer, raw_post, run_loom, synth, write_config  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()


def model(name, ctx, **kw):
    path = os.path.join(TMP.name, name)
    return path if os.path.exists(path) else synth(path, ctx, **kw)


def wait_until(predicate, timeout, interval=0.01):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def raise_open_file_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed and (hard == resource.RLIM_INFINITY or hard >= needed):
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= needed


class AbandonedRequestTest(unittest.TestCase):
    """1. A non-streaming request whose client disconnects is cancelled, and its blocks freed."""

    def test_non_streaming_disconnect_frees_blocks_at_once(self):
        server = LoomServer(write_config("abandon.toml"), model("long-4k.gguf", 4096))
        try:
            before = server.metrics()
            socks = [raw_post(server.host, server.port, "/v1/completions",
                              {"prompt": f"Tell a long story {i}", "max_tokens": 4000, "ignore_eos": True})
                     for i in range(3)]
            self.assertTrue(wait_until(lambda: server.metrics()["loom_num_requests_running"] == 3, 30))
            held = server.metrics()["loom_kv_blocks_used"]
            self.assertGreater(held, 0)
            for sock in socks:
                sock.close()
            closed = time.perf_counter()
            self.assertTrue(wait_until(lambda: server.metrics()["loom_kv_blocks_used"] == 0, 5),
                            "the abandoned requests still hold KV blocks")
            freed_after = time.perf_counter() - closed
            m = server.metrics()
            self.assertEqual(m["loom_num_requests_running"], 0)
            self.assertEqual(m["loom_server_queue_depth"], 0)
            reason = 'loom_requests_cancelled_total{reason="client_disconnected"}'
            self.assertEqual(m[reason] - before.get(reason, 0), 3)
            # 4,000 tokens each would take seconds more; cancelled, they are gone within a poll and a step.
            self.assertLess(freed_after, 1.0)
            print(f"\nabandoned: {held:.0f} blocks held by 3 non-streaming requests, all freed "
                  f"{freed_after * 1e3:.0f} ms after their clients closed", file=sys.stderr)
            self.assertEqual(server.json("GET", "/health")[0], 200)
        finally:
            self.assertEqual(server.terminate(), 0, server.log())


class ContextBoundTest(unittest.TestCase):
    """2. Every request is bounded by the context, which the KV pool holds at least once."""

    # 4 layers x 4 KV heads x 16 dims x 2 bytes x 2 (K and V) = 1 KiB per token: 1 MiB holds 1024 tokens,
    # half of this model's 2048-token context.
    SMALL_POOL = dict(kv_memory="1MiB")

    def small_pool_model(self):
        return model("ctx2k-wide-kv.gguf", 2048, layers=4, kv_heads=4)

    def test_default_context_is_lowered_to_fit_and_a_lone_sequence_ends_with_length(self):
        server = LoomServer(write_config("small-pool.toml", **self.SMALL_POOL), self.small_pool_model())
        try:
            self.assertRegex(server.log(), r"context 1024, lowered from 2048 to fit the KV cache")
            self.assertRegex(server.log(), r"= 1 full-context sequences")
            status, body = server.json("POST", "/v1/completions", {"prompt": "Once", "ignore_eos": True})
            self.assertEqual(status, 200, body)
            choice = body["choices"][0]
            self.assertEqual(choice["finish_reason"], "length")
            usage = body["usage"]
            self.assertEqual(usage["prompt_tokens"] + usage["completion_tokens"], 1024)
            self.assertTrue(choice["text"])
            self.assertEqual(server.wait_kv_free()["loom_kv_blocks_used"], 0)
        finally:
            self.assertEqual(server.terminate(), 0, server.log())

    def test_explicit_context_that_does_not_fit_is_refused_naming_both_settings(self):
        config = write_config("small-pool-explicit.toml", **self.SMALL_POOL)
        with open(config, "a") as f:
            f.write("\n[model]\nn_ctx = 2048\n")
        result = run_loom("serve", "--config", config, "--model", self.small_pool_model(), "--port", "0", timeout=60)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("[model] n_ctx = 2048", result.stderr)
        self.assertIn("[kv] memory", result.stderr)
        self.assertIn("at most 1024", result.stderr)

    def test_max_tokens_past_the_context_is_a_400_naming_both_numbers(self):
        server = LoomServer(write_config("ctx.toml"), model("ctx256.gguf", 256))
        try:
            status, prompt = server.json("POST", "/tokenize", {"content": "Hello there"})
            n_prompt = len(prompt["tokens"])
            for endpoint, body in [("/v1/completions", {"prompt": "Hello there"}),
                                   ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})]:
                for max_tokens in (100_000_000, 256):
                    with self.subTest(endpoint=endpoint, max_tokens=max_tokens):
                        status, resp = server.json("POST", endpoint, {**body, "max_tokens": max_tokens})
                        self.assertEqual(status, 400, resp)
                        self.assertEqual(resp["error"]["param"], "max_tokens")
                        self.assertIn("maximum context length is 256", resp["error"]["message"])
                        self.assertIn(str(max_tokens), resp["error"]["message"])
            # Exactly the room left is fine; so is leaving max_tokens out (up to the context).
            status, resp = server.json("POST", "/v1/completions",
                                       {"prompt": "Hello there", "max_tokens": 256 - n_prompt, "ignore_eos": True})
            self.assertEqual(status, 200, resp)
            self.assertEqual(resp["usage"]["completion_tokens"], 256 - n_prompt)
            status, resp = server.json("POST", "/v1/completions", {"prompt": "Hello there", "ignore_eos": True})
            self.assertEqual(status, 200, resp)
            self.assertEqual(resp["usage"]["completion_tokens"], 256 - n_prompt)
        finally:
            self.assertEqual(server.terminate(), 0, server.log())

    def test_default_model_start_up_line_fits_a_full_context(self):
        record = os.path.expanduser("~/.cache/loom/default-model.txt")
        if not os.path.exists(record):
            self.skipTest("the default model is not installed (scripts/setup.sh installs it)")
        with open(record) as f:
            default_model = f.read().strip()
        config = os.path.join(TMP.name, "defaults.toml")  # every KV and context setting at its default
        with open(config, "w") as f:
            f.write("[backend]\nthreads = 2\n")
        server = LoomServer(config, default_model)
        try:
            match = re.search(r"= (\d+) full-context sequences", server.log())
            self.assertIsNotNone(match, server.log())
            print("\n" + next(line for line in server.log().splitlines() if "full-context" in line), file=sys.stderr)
            self.assertGreaterEqual(int(match.group(1)), 1, server.log())
        finally:
            self.assertEqual(server.terminate(), 0, server.log())


class ModelNameTest(unittest.TestCase):
    """3. A request for a model this server does not serve is a 404, not another model's answer."""

    def test_unknown_model_is_404_and_aliases_are_served(self):
        server = LoomServer(write_config("names.toml", 'model_name = "tiny"\nmodel_aliases = ["tiny-latest"]'),
                            model("ctx256.gguf", 256))
        try:
            for endpoint, body in [("/v1/completions", {"prompt": "x", "max_tokens": 2}),
                                   ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                             "max_tokens": 2})]:
                with self.subTest(endpoint=endpoint):
                    status, resp = server.json("POST", endpoint, {**body, "model": "gpt-4o"})
                    self.assertEqual(status, 404, resp)
                    self.assertEqual(resp["error"]["code"], "model_not_found")
                    self.assertEqual(resp["error"]["param"], "model")
                    self.assertIn("'tiny', 'tiny-latest'", resp["error"]["message"])
                    for name in ("tiny", "tiny-latest"):
                        self.assertEqual(server.json("POST", endpoint, {**body, "model": name})[0], 200)
                    self.assertEqual(server.json("POST", endpoint, body)[0], 200)  # no model: the served one
            status, models = server.json("GET", "/v1/models")
            self.assertEqual([m["id"] for m in models["data"]], ["tiny", "tiny-latest"])
            self.assertEqual(server.json("GET", "/v1/models/tiny-latest")[0], 200)
            self.assertEqual(server.json("GET", "/v1/models/gpt-4o")[0], 404)
            self.assertEqual(server.metrics()["loom_kv_blocks_used"], 0)
        finally:
            self.assertEqual(server.terminate(), 0, server.log())


class ConnectionLimitTest(unittest.TestCase):
    """4. Idle and slow clients cannot starve the server."""

    def health_latencies(self, server, n=10):
        latencies = []
        for _ in range(n):
            start = time.perf_counter()
            status, _, _ = server.request("GET", "/health", timeout=10)
            latencies.append(time.perf_counter() - start)
            self.assertEqual(status, 200)
        return latencies

    def test_a_thousand_idle_sockets_leave_health_fast(self):
        n_idle = 1000
        if not raise_open_file_limit(n_idle + 200):
            self.skipTest(f"this process may not open {n_idle + 200} files (ulimit -n)")
        server = LoomServer(write_config("idle.toml"), model("ctx256.gguf", 256))
        socks = []
        try:
            for _ in range(n_idle):
                socks.append(socket.create_connection((server.host, server.port), timeout=10))
            self.assertTrue(wait_until(lambda: server.metrics()["loom_http_connections_idle"] >= n_idle, 10))
            latencies = self.health_latencies(server)
            m = server.metrics()
            print(f"\nidle: {n_idle} idle sockets open ({m['loom_http_connections_open']:.0f} connections); "
                  f"/health median {statistics.median(latencies) * 1e3:.1f} ms, "
                  f"max {max(latencies) * 1e3:.1f} ms", file=sys.stderr)
            self.assertLess(statistics.median(latencies), 0.1)
            self.assertLess(max(latencies), 1.0)
            # They hold no worker: a generation still runs at once.
            status, body = server.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 4})
            self.assertEqual(status, 200, body)
        finally:
            for sock in socks:
                sock.close()
            self.assertEqual(server.terminate(), 0, server.log())

    def test_connection_cap_is_answered_503_and_recovers(self):
        server = LoomServer(write_config("cap.toml", "max_connections = 20"), model("ctx256.gguf", 256))
        socks = []
        try:
            # One kept-alive socket reads /metrics, so polling opens no short-lived connections that the
            # server might still count (and that would take the extra one's place); 19 idle sockets
            # beside it make 20.
            reader = socket.create_connection((server.host, server.port), timeout=10)
            socks.append(reader)
            for _ in range(19):
                socks.append(socket.create_connection((server.host, server.port), timeout=10))
            self.assertTrue(wait_until(lambda: open_count_on(reader) == 20, 10))
            # One more: answered 503 with a JSON reason, then closed.
            extra = raw_post(server.host, server.port, "/v1/completions", {"prompt": "x", "max_tokens": 2})
            reply = read_all(extra)
            self.assertTrue(reply.startswith(b"HTTP/1.1 503"), reply[:200])
            body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
            self.assertEqual(body["error"]["code"], "too_many_connections")
            self.assertIn("max_connections", body["error"]["message"])
            for sock in socks:
                sock.close()
            socks.clear()
            self.assertTrue(wait_until(lambda: server_open_count(server) <= 1, 5))
            self.assertEqual(server.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})[0], 200)
            self.assertGreaterEqual(server.metrics()["loom_http_connections_refused_total"], 1)
        finally:
            for sock in socks:
                sock.close()
            self.assertEqual(server.terminate(), 0, server.log())

    def test_idle_slow_and_long_lived_connections_are_closed_by_their_limits(self):
        server = LoomServer(write_config("timeouts.toml", "keep_alive_timeout = 0.5\nrequest_read_timeout = 1.0\n"
                                                          "keep_alive_max_requests = 3"),
                            model("ctx256.gguf", 256))
        try:
            # A socket that never sends: closed after request_read_timeout.
            silent = socket.create_connection((server.host, server.port), timeout=10)
            start = time.perf_counter()
            self.assertEqual(silent.recv(1), b"")
            self.assertLess(time.perf_counter() - start, 3.0)
            silent.close()
            # A request trickled a byte at a time: cut off once request_read_timeout has passed.
            slow = socket.create_connection((server.host, server.port), timeout=10)
            start = time.perf_counter()
            request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 200
            cut = False
            for byte in request:
                try:
                    slow.sendall(bytes([byte]))
                except OSError:
                    cut = True
                    break
                if time.perf_counter() - start > 4:
                    break
                time.sleep(0.05)
            slow.settimeout(5)
            try:
                cut = cut or slow.recv(1024) == b""
            except ConnectionResetError:
                cut = True
            slow.close()
            self.assertTrue(cut, "a trickling client kept its connection")
            # Keep-alive: idle between requests closes after keep_alive_timeout; at most 3 requests each.
            conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
            headers = []
            for _ in range(3):
                conn.request("GET", "/health")
                resp = conn.getresponse()
                resp.read()
                headers.append(resp.getheader("Connection"))
            conn.close()
            self.assertEqual(headers[-1], "close")
            self.assertNotEqual(headers[0], "close")
            m = server.metrics()
            self.assertGreaterEqual(m['loom_http_connections_timed_out_total{reason="idle"}'], 1)
            self.assertGreaterEqual(m['loom_http_connections_timed_out_total{reason="read"}'], 1)
            self.assertEqual(server.json("GET", "/health")[0], 200)
        finally:
            self.assertEqual(server.terminate(), 0, server.log())


def server_open_count(server):
    # Until the server has seen the closed sockets it may still be at its cap and answer this very
    # request 503: that reads as "not yet", not as a failure.
    status, _, data = server.request("GET", "/metrics")
    if status == 503:
        return float("inf")
    assert status == 200, status
    for line in data.decode().splitlines():
        if line.startswith("loom_http_connections_open "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("loom_http_connections_open is missing from /metrics")


def open_count_on(sock):
    """Reads loom_http_connections_open over a kept-alive socket, so that reading it opens nothing new."""
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += sock.recv(4096)
    for line in body.decode().splitlines():
        if line.startswith("loom_http_connections_open "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("loom_http_connections_open is missing from /metrics")


def read_all(sock):
    data = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    sock.close()
    return data


class ConfigErrorsTest(unittest.TestCase):
    """5. A configuration with several errors reports all of them in one run."""

    def test_two_errors_are_both_reported_with_file_line_and_key(self):
        path = os.path.join(TMP.name, "two-errors.toml")
        with open(path, "w") as f:
            f.write('[server]\nport = "eighty"\n\n[kv]\nblock_size = 24\n')
        for args in (["config", "check", path], ["serve", "--config", path, "--port", "0"]):
            with self.subTest(command=args[0]):
                result = run_loom(*args, timeout=60)
                self.assertNotEqual(result.returncode, 0)
                self.assertIn(f"{path}:2: key 'server.port'", result.stderr)
                self.assertIn(f"{path}:5: key 'kv.block_size'", result.stderr)
                self.assertIn("2 errors", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v", *UNITTEST_ARGS])
