#!/usr/bin/env python3
"""End-to-end tests of `loom serve` on a synthetic model.

Starts the real binary on 127.0.0.1 (--port 0; the bound port is read from its stdout) and drives it
with the official `openai` client and with raw HTTP (http.client / sockets): completions and chat,
streaming, parameters, errors, /metrics, /tokenize, a client vanishing mid-stream, a bounded load test
and SIGTERM with requests in flight.

usage: test_server.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
Exit code 77 (CTest SKIP_RETURN_CODE) when `openai` is not installed.
"""
import concurrent.futures
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import unittest


try:
    import openai
except ImportError:
    print("SKIP: the `openai` Python package is not installed (run scripts/setup.sh or pip install openai)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness  # noqa: E402
from server_harness import TMP, write_config  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()
MODEL = os.path.join(TMP.name, "tiny-llama.gguf")
MODEL_NAME = "tiny-llama"
N_CTX = 256
# The shutdown tests need requests that outlast the time it takes to get four of them in flight on a
# busy machine: a longer context allows longer generations.
LONG_MODEL = os.path.join(TMP.name, "tiny-llama-1k.gguf")


class LoomServer(server_harness.LoomServer):
    """The harness's server, on the tiny model unless told otherwise, with an `openai` client."""

    def __init__(self, config, extra_args=(), model=MODEL):
        super().__init__(config, model, extra_args)

    def client(self, api_key="unused", **kw):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=api_key, max_retries=0, timeout=60, **kw)


SERVER = None


def setUpModule():
    global SERVER
    server_harness.synth(MODEL, N_CTX)
    server_harness.synth(LONG_MODEL, 1024)
    # max_queue = the load test's concurrency; test_queue_full goes past it.
    SERVER = LoomServer(write_config("main.toml", f'max_queue = 32\nmodel_name = "{MODEL_NAME}"'))


def tearDownModule():
    if SERVER is not None:
        code = SERVER.terminate()
        assert code == 0, f"loom serve exited {code}; stderr:\n{SERVER.log()}"


def stream_text(stream):
    text, finish, usage, chunks = "", None, None, []
    for chunk in stream:
        chunks.append(chunk)
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if hasattr(choice, "delta"):
                text += choice.delta.content or ""
            else:
                text += choice.text
            finish = choice.finish_reason or finish
    return text, finish, usage, chunks


class OpenAIClientTest(unittest.TestCase):
    def setUp(self):
        self.client = SERVER.client()

    def tearDown(self):
        self.client.close()

    def test_models(self):
        models = self.client.models.list().data
        self.assertEqual([m.id for m in models], [MODEL_NAME])
        self.assertEqual(self.client.models.retrieve(MODEL_NAME).id, MODEL_NAME)

    def test_completion_greedy_and_usage(self):
        r = self.client.completions.create(model=MODEL_NAME, prompt="Hello world", max_tokens=8, temperature=0)
        again = self.client.completions.create(model=MODEL_NAME, prompt="Hello world", max_tokens=8, temperature=0)
        self.assertEqual(r.object, "text_completion")
        self.assertTrue(r.id.startswith("cmpl-"))
        self.assertEqual(r.model, MODEL_NAME)
        self.assertEqual(len(r.choices), 1)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertEqual(r.choices[0].text, again.choices[0].text)  # greedy is deterministic
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertTrue(1 <= r.usage.completion_tokens <= 8)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        # The second identical prompt may reuse cached blocks; never more than the prompt.
        self.assertLessEqual(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens)

    def test_completion_stream_matches_non_stream(self):
        kw = dict(model=MODEL_NAME, prompt="Once upon a time", max_tokens=12, temperature=0,
                  extra_body={"ignore_eos": True})
        whole = self.client.completions.create(**kw)
        text, finish, usage, chunks = stream_text(self.client.completions.create(
            stream=True, stream_options={"include_usage": True}, **kw))
        self.assertEqual(text, whole.choices[0].text)
        self.assertEqual(finish, "length")
        self.assertEqual(whole.usage.completion_tokens, 12)
        self.assertEqual(usage.completion_tokens, 12)
        self.assertEqual(chunks[-1].choices, [])  # the usage chunk comes last, with no choices
        self.assertTrue(all(c.object == "text_completion" and c.id == chunks[0].id for c in chunks))

    def test_chat_and_chat_stream(self):
        messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi"}]
        kw = dict(model=MODEL_NAME, messages=messages, max_tokens=10, temperature=0, extra_body={"ignore_eos": True})
        r = self.client.chat.completions.create(**kw)
        self.assertEqual(r.object, "chat.completion")
        self.assertTrue(r.id.startswith("chatcmpl-"))
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 10)
        stream = self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw)
        text, finish, usage, chunks = stream_text(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual(chunks[0].object, "chat.completion.chunk")
        self.assertEqual(text, r.choices[0].message.content)
        self.assertEqual(finish, "length")
        self.assertEqual(usage.total_tokens, r.usage.total_tokens)
        # max_completion_tokens is the newer name of max_tokens.
        r2 = self.client.chat.completions.create(model=MODEL_NAME, messages=messages, max_completion_tokens=3,
                                                 extra_body={"ignore_eos": True})
        self.assertEqual(r2.usage.completion_tokens, 3)

    def test_n_choices_and_seed(self):
        kw = dict(model=MODEL_NAME, prompt="abc", max_tokens=10, temperature=1.0, seed=11, n=3,
                  extra_body={"ignore_eos": True, "top_k": 0, "top_p": 1.0, "min_p": 0.0})
        a = self.client.completions.create(**kw)
        b = self.client.completions.create(**kw)
        self.assertEqual([c.index for c in a.choices], [0, 1, 2])
        self.assertEqual([c.text for c in a.choices], [c.text for c in b.choices])  # seeded: reproducible
        self.assertEqual(a.usage.completion_tokens, 30)
        # Streaming with n: chunks carry their choice index.
        stream = self.client.completions.create(stream=True, **kw)
        texts = ["", "", ""]
        for chunk in stream:
            for c in chunk.choices:
                texts[c.index] += c.text
        self.assertEqual(texts, [c.text for c in a.choices])

    def test_stop_string(self):
        kw = dict(model=MODEL_NAME, prompt="The quick brown fox", max_tokens=40, temperature=0,
                  extra_body={"ignore_eos": True})
        full = self.client.completions.create(**kw).choices[0].text
        stop = full[len(full) // 2:len(full) // 2 + 2]
        self.assertTrue(stop.strip(), "the model's output is too short to pick a stop string")
        cut = self.client.completions.create(stop=[stop, "\u2603never"], **kw).choices[0]
        self.assertEqual(cut.finish_reason, "stop")
        self.assertEqual(cut.text, full[:full.index(stop)])

    def test_logprobs(self):
        r = self.client.completions.create(model=MODEL_NAME, prompt="Hi", max_tokens=5, temperature=0, logprobs=2,
                                           extra_body={"ignore_eos": True})
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 5)
        self.assertEqual(len(lp.token_logprobs), 5)
        self.assertTrue(all(v <= 0 for v in lp.token_logprobs))
        self.assertTrue(all(1 <= len(top) <= 2 for top in lp.top_logprobs))
        self.assertEqual(lp.text_offset[0], 0)
        c = self.client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "x"}],
                                                max_tokens=4, logprobs=True, top_logprobs=3, temperature=0,
                                                extra_body={"ignore_eos": True})
        content = c.choices[0].logprobs.content
        self.assertEqual(len(content), 4)
        self.assertTrue(all(len(t.top_logprobs) == 3 for t in content))
        # Greedy: the chosen token is the most likely one.
        self.assertTrue(all(t.token == t.top_logprobs[0].token for t in content))
        self.assertTrue(all(t.logprob <= 0 for t in content))

    def test_errors_name_the_param(self):
        cases = [
            (dict(max_tokens=-1), "max_tokens"),
            (dict(max_tokens=0), "max_tokens"),
            (dict(temperature=5), "temperature"),
            (dict(top_p=1.5), "top_p"),
            (dict(extra_body={"top_k": "ten"}), "top_k"),
            (dict(n=0), "n"),
            (dict(stop=7), "stop"),
        ]
        for kw, param in cases:
            with self.subTest(param=param, kw=kw):
                with self.assertRaises(openai.BadRequestError) as ctx:
                    self.client.completions.create(model=MODEL_NAME, prompt="x", **kw)
                self.assertEqual(ctx.exception.status_code, 400)
                self.assertEqual(ctx.exception.param, param)
                self.assertEqual(ctx.exception.type, "invalid_request_error")
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.completions.create(model=MODEL_NAME, prompt=[5] * (N_CTX + 10), max_tokens=2)
        self.assertEqual(ctx.exception.param, "prompt")
        self.assertIn("context", str(ctx.exception))
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "a " * 600}])
        self.assertEqual(ctx.exception.param, "messages")
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "wizard", "content": "x"}])
        self.assertEqual(ctx.exception.param, "messages[0].role")
        # An image sent to a model with no vision encoder: a 400 naming the part, through the official client.
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.client.chat.completions.create(
                model=MODEL_NAME, messages=[{"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]}])
        self.assertEqual(ctx.exception.param, "messages[0].content[1]")
        self.assertIn("takes no images", str(ctx.exception))


class RawHttpTest(unittest.TestCase):
    def assert_error(self, status, body, expected_status, param=None):
        self.assertEqual(status, expected_status, body)
        err = body["error"]
        self.assertEqual(set(err), {"message", "type", "param", "code"})
        self.assertTrue(err["message"])
        self.assertEqual(err["param"], param)

    def test_malformed_json(self):
        for raw in ['{"prompt": "x", ', "not json", "[1, 2]", ""]:
            with self.subTest(raw=raw):
                status, _, data = SERVER.request("POST", "/v1/completions", raw)
                self.assert_error(status, json.loads(data), 400)
                self.assertEqual(json.loads(data)["error"]["type"], "invalid_request_error")

    def test_wrong_types_and_unknown_fields(self):
        cases = [
            ({"prompt": "x", "max_tokens": "10"}, "max_tokens"),
            ({"prompt": "x", "temperature": "hot"}, "temperature"),
            ({"prompt": "x", "stream": "yes"}, "stream"),
            ({"prompt": "x", "seed": 1.5}, "seed"),
            ({"prompt": "x", "logprobs": True, "max_tokens": 1.5}, "max_tokens"),
            ({"prompt": 42}, "prompt"),
            ({}, "prompt"),
        ]
        for body, param in cases:
            with self.subTest(body=body):
                status, resp = SERVER.json("POST", "/v1/completions", body)
                self.assert_error(status, resp, 400, param)
        status, resp = SERVER.json("POST", "/v1/chat/completions", {"messages": "hi"})
        self.assert_error(status, resp, 400, "messages")
        status, resp = SERVER.json("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]})
        self.assert_error(status, resp, 400, "messages[0].content")
        # Unknown fields are ignored, as OpenAI does.
        status, resp = SERVER.json("POST", "/v1/completions",
                                   {"prompt": "x", "max_tokens": 2, "frobnicate": {"a": 1}, "user": "u1"})
        self.assertEqual(status, 200, resp)
        self.assertEqual(resp["usage"]["completion_tokens"] <= 2, True)

    def test_oversized_body_and_unknown_route(self):
        status, _, data = SERVER.request("POST", "/v1/completions", json.dumps({"prompt": "x" * 200_000}))
        self.assert_error(status, json.loads(data), 413)
        self.assertEqual(json.loads(data)["error"]["code"], "request_too_large")
        status, _, data = SERVER.request("GET", "/v1/nothing-here")
        self.assert_error(status, json.loads(data), 404)
        status, resp = SERVER.json("GET", "/health")
        self.assertEqual((status, resp), (200, {"status": "ok"}))  # still serving

    def test_tokenize_round_trip(self):
        text = "Hello, world! 123"
        status, resp = SERVER.json("POST", "/tokenize", {"content": text, "add_special": False})
        self.assertEqual(status, 200)
        tokens = resp["tokens"]
        self.assertTrue(tokens and all(isinstance(t, int) for t in tokens))
        status, resp = SERVER.json("POST", "/detokenize", {"tokens": tokens})
        self.assertEqual((status, resp["content"]), (200, text))
        status, resp = SERVER.json("POST", "/tokenize", {"content": text, "with_pieces": True})
        self.assertEqual(status, 200)
        self.assertTrue(all("id" in t and "piece" in t for t in resp["tokens"]))
        status, resp = SERVER.json("POST", "/detokenize", {"tokens": [1, 999999]})
        self.assert_error(status, resp, 400, "tokens")
        status, resp = SERVER.json("POST", "/tokenize", {"content": 5})
        self.assert_error(status, resp, 400, "content")

    def test_metrics_format(self):
        SERVER.json("POST", "/v1/completions", {"prompt": "warm up", "max_tokens": 3})
        status, headers, data = SERVER.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain"))
        text = data.decode()
        sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? '
                            r'[-+]?(\d+(\.\d*)?([eE][-+]?\d+)?|Inf|NaN)$')
        declared = {}
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                declared[name] = kind
            elif line and not line.startswith("# HELP "):
                self.assertRegex(line, sample)
        for name, kind in [("loom_requests_total", "counter"), ("loom_time_to_first_token_seconds", "histogram"),
                           ("loom_time_per_output_token_seconds", "histogram"),
                           ("loom_request_queue_time_seconds", "histogram"), ("loom_num_requests_running", "gauge"),
                           ("loom_num_requests_waiting", "gauge"), ("loom_kv_blocks_used", "gauge"),
                           ("loom_kv_blocks_total", "gauge"), ("loom_prefix_cache_hit_rate", "gauge"),
                           ("loom_generation_tokens_total", "counter"), ("loom_prompt_tokens_total", "counter"),
                           ("loom_http_requests_total", "counter")]:
            self.assertEqual(declared.get(name), kind, name)
        m = SERVER.metrics()
        self.assertGreater(m['loom_requests_total{outcome="finished"}'], 0)
        self.assertGreater(m["loom_kv_blocks_total"], 0)
        self.assertGreater(m["loom_generation_tokens_total"], 0)
        buckets = [v for k, v in m.items() if k.startswith("loom_time_to_first_token_seconds_bucket")]
        self.assertEqual(buckets, sorted(buckets))  # cumulative
        self.assertEqual(buckets[-1], m["loom_time_to_first_token_seconds_count"])
        self.assertGreater(m['loom_http_requests_total{route="/v1/completions",code="200"}'], 0)

    def test_disconnect_mid_stream_frees_blocks(self):
        # A server of its own on the default model with room for a long answer: the tiny model wrote its
        # whole 200-token answer before the client had closed (seen in CI), leaving nothing to cancel.
        record = os.path.expanduser("~/.cache/loom/default-model.txt")
        if not os.path.exists(record):
            self.skipTest("the default model is not installed (scripts/setup.sh installs it)")
        with open(record) as f:
            default_model = f.read().strip()
        server = LoomServer(write_config("disconnect.toml", f'model_name = "{MODEL_NAME}"', kv_memory="64MiB"), model=default_model)
        try:
            before = server.metrics()['loom_requests_total{outcome="cancelled"}']
            sock = socket.create_connection((server.host, server.port), timeout=30)
            body = json.dumps({"prompt": "a long story", "max_tokens": 2000, "stream": True, "ignore_eos": True,
                               "temperature": 0})
            sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
            received = b""
            while received.count(b"data: {") < 3:
                chunk = sock.recv(4096)
                self.assertTrue(chunk, "the server closed the stream early: " + repr(received[-600:]))
                received += chunk
            self.assertIn(b"text/event-stream", received)
            self.assertGreater(server.metrics()["loom_kv_blocks_used"], 0)
            sock.close()
            m = server.wait_kv_free()
            self.assertEqual(m["loom_kv_blocks_used"], 0)
            self.assertEqual(m['loom_requests_total{outcome="cancelled"}'], before + 1)
            status, resp = server.json("GET", "/health")
            self.assertEqual(status, 200)
        finally:
            server.terminate()


class QueueTest(unittest.TestCase):
    def test_queue_full_is_429_with_retry_after(self):
        def one(i):
            return SERVER.request("POST", "/v1/completions",
                                  {"prompt": f"q{i}", "max_tokens": 200, "ignore_eos": True}, timeout=120)

        with concurrent.futures.ThreadPoolExecutor(48) as pool:
            results = list(pool.map(one, range(48)))
        statuses = [status for status, _, _ in results]
        self.assertTrue(set(statuses) <= {200, 429}, statuses)
        self.assertGreaterEqual(statuses.count(200), 32)
        self.assertGreater(statuses.count(429), 0)
        status, headers, data = next(r for r in results if r[0] == 429)
        self.assertEqual(headers.get("Retry-After"), "1")
        self.assertEqual(json.loads(data)["error"]["code"], "rate_limit_exceeded")
        self.assertEqual(SERVER.wait_kv_free()["loom_kv_blocks_used"], 0)


class LoadTest(unittest.TestCase):
    def test_load_200_requests_concurrency_32(self):
        n_requests, concurrency = 200, 32

        def one(i):
            body = {"prompt": f"request {i} says", "max_tokens": 16, "temperature": 0.7, "seed": i,
                    "ignore_eos": True, "stream": i % 2 == 0}
            start = time.perf_counter()
            status, _, data = SERVER.request("POST", "/v1/completions", body, timeout=120)
            elapsed = time.perf_counter() - start
            if status == 200 and body["stream"]:
                self.assertTrue(data.rstrip().endswith(b"data: [DONE]"), data[-200:])
            elif status == 200:
                self.assertEqual(json.loads(data)["usage"]["completion_tokens"], 16)
            return status, elapsed

        before = SERVER.metrics()
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            results = list(pool.map(one, range(n_requests)))
        wall = time.perf_counter() - start
        statuses = [s for s, _ in results]
        self.assertTrue(set(statuses) <= {200, 429, 503}, statuses)
        self.assertGreater(statuses.count(200), 0)
        self.assertIsNone(SERVER.proc.poll(), "the server died")
        m = SERVER.wait_kv_free()
        self.assertEqual(m["loom_kv_blocks_used"], 0)
        self.assertEqual(m["loom_server_queue_depth"], 0)
        ok = sorted(t for s, t in results if s == 200)
        p = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))]
        print(f"\nload: {n_requests} requests at concurrency {concurrency} in {wall:.2f} s = "
              f"{n_requests / wall:.1f} req/s; 200: {statuses.count(200)}, 429: {statuses.count(429)}, "
              f"503: {statuses.count(503)}; latency of 200s p50 {p(0.5) * 1e3:.0f} ms, p99 {p(0.99) * 1e3:.0f} ms",
              file=sys.stderr)

        # The server's own TTFT / TPOT histograms over exactly this load.
        def mean(name):
            count = m[name + "_count"] - before[name + "_count"]
            self.assertGreater(count, 0, name)
            return (m[name + "_sum"] - before[name + "_sum"]) / count
        ttft, tpot = mean("loom_time_to_first_token_seconds"), mean("loom_time_per_output_token_seconds")
        print(f"load: mean TTFT {ttft * 1e3:.1f} ms, mean TPOT {tpot * 1e3:.2f} ms (server metrics)", file=sys.stderr)


class ApiKeyTest(unittest.TestCase):
    def test_api_key(self):
        server = LoomServer(write_config("key.toml", 'api_key = "sekret"\nmodel_name = "m"'))
        try:
            with self.assertRaises(openai.AuthenticationError) as ctx:
                server.client(api_key="wrong").completions.create(model="m", prompt="x", max_tokens=1)
            self.assertEqual(ctx.exception.status_code, 401)
            status, resp = server.json("POST", "/v1/completions", {"prompt": "x"})
            self.assertEqual(status, 401)
            self.assertEqual(resp["error"]["code"], "invalid_api_key")
            status, _ = server.json("GET", "/metrics".replace("/metrics", "/v1/models"))
            self.assertEqual(status, 401)
            self.assertEqual(server.json("GET", "/health")[0], 200)  # health needs no key
            r = server.client(api_key="sekret").completions.create(model="m", prompt="x", max_tokens=2)
            self.assertEqual(len(r.choices), 1)
        finally:
            code = server.terminate()
            self.assertEqual(code, 0, server.log())


class ShutdownTest(unittest.TestCase):
    def test_sigterm_finishes_requests_in_flight(self):
        # A generous deadline: on a loaded CI machine 1000 tokens can take far longer than the default 30 s,
        # and this test is about finishing, not about the deadline (the next test covers that).
        server = LoomServer(write_config("shutdown.toml", 'model_name = "m"'), extra_args=("--shutdown-timeout", "600"), model=LONG_MODEL)
        client = server.client()
        results = {}

        def streaming(i):
            stream = client.completions.create(model="m", prompt=f"story {i}", max_tokens=1000, stream=True,
                                               extra_body={"ignore_eos": True})
            finish, n = None, 0
            for chunk in stream:
                for c in chunk.choices:
                    finish = c.finish_reason or finish
                    n += 1
            results[i] = (finish, n > 1)

        def whole(i):
            r = client.completions.create(model="m", prompt=f"tale {i}", max_tokens=1000,
                                          extra_body={"ignore_eos": True})
            results[i] = (r.choices[0].finish_reason, r.usage.completion_tokens)

        threads = [threading.Thread(target=streaming, args=(i,)) for i in range(3)]
        threads.append(threading.Thread(target=whole, args=(3,)))
        for t in threads:
            t.start()
        # SIGTERM only once all four are inside the engine.
        deadline = time.time() + 30
        while server.metrics()["loom_server_queue_depth"] < 4 and time.time() < deadline:
            time.sleep(0.005)
        self.assertEqual(server.metrics()["loom_server_queue_depth"], 4, "the requests did not all arrive")
        server.proc.send_signal(signal.SIGTERM)
        # New work is refused while the old finishes (or the listener is already closed).
        try:
            while server.json("GET", "/health")[0] == 200:
                time.sleep(0.001)
            status, resp = server.json("POST", "/v1/completions", {"prompt": "late", "max_tokens": 2})
            self.assertEqual(status, 503, resp)
            self.assertEqual(resp["error"]["code"], "shutting_down")
        except ConnectionError:
            pass
        for t in threads:
            t.join(600)
        client.close()
        code = server.terminate(timeout=600)
        self.assertEqual(code, 0, server.log())
        for i in range(3):
            self.assertEqual(results.get(i), ("length", True))
        self.assertEqual(results.get(3)[0], "length")
        self.assertGreater(results.get(3)[1], 0)
        self.assertIn("SIGTERM received", server.log())

    def test_sigterm_past_the_deadline_cancels_with_a_clear_error(self):
        server = LoomServer(write_config("deadline.toml", 'model_name = "m"'), extra_args=("--shutdown-timeout", "0"), model=LONG_MODEL)
        client = server.client()
        results = {}

        def streaming():
            try:
                for _ in client.completions.create(model="m", prompt="long", max_tokens=1000, stream=True,
                                                   extra_body={"ignore_eos": True}):
                    pass
                results["stream"] = "finished"
            except openai.APIError as e:
                results["stream"] = e.message

        def whole():
            try:
                client.completions.create(model="m", prompt="longer", max_tokens=1000, extra_body={"ignore_eos": True})
                results["whole"] = "finished"
            except openai.APIStatusError as e:
                results["whole"] = (e.status_code, e.code)

        threads = [threading.Thread(target=streaming), threading.Thread(target=whole)]
        for t in threads:
            t.start()
        deadline = time.time() + 30
        while server.metrics()["loom_server_queue_depth"] < 2 and time.time() < deadline:
            time.sleep(0.005)
        server.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(600)
        client.close()
        code = server.terminate(timeout=600)
        self.assertEqual(code, 0, server.log())
        self.assertIn("shutting down", results.get("stream", ""))
        self.assertEqual(results.get("whole"), (503, "shutting_down"))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v", *UNITTEST_ARGS])
