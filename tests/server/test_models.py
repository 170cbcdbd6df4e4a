#!/usr/bin/env python3
"""Issue 39: several models behind one server ([[models]]), driven by the official `openai` client.

Two synthetic models under a [server] memory_budget that holds one of them:
  - /v1/models lists both with their state (the preloaded one "loaded", the other "unloaded") and
    their aliases;
  - a request naming the other model loads it, unloading the first (least recently used, idle);
    a model answers as it does served alone, before and after being unloaded and loaded again;
  - interleaved requests to both from many threads, streamed and not, are all answered; /metrics
    counts the loads and unloads under a `model` label, and the KV blocks return to zero;
  - with model_swap_wait = 0, a request for the other model while the resident one is busy gets 503
    with Retry-After, and once it is idle the same request is answered;
  - idle_unload unloads a model nobody uses (counted with reason "idle");
  - an unknown name is a 404 listing the models; a model larger than the budget alone is refused
    at start-up naming the budget.
Skips (77) without the `openai` package.
usage: test_models.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest

try:
    import openai
except ImportError:
    print("skipped: the openai package is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()

KV_MEMORY = "4MiB"


def models_config(name, models, server_extra):
    """A loom.toml serving `models` ({name: (path, extra keys)}) with `server_extra` in [server]."""
    path = server_harness.write_config(name, server_extra, kv_memory=KV_MEMORY)
    with open(path, "a") as f:
        for model_name, (model_path, extra) in models.items():
            f.write(f'\n[[models]]\nname = "{model_name}"\npath = "{model_path}"\n{extra}\n')
    return path


def series(metrics, name, model, **labels):
    key = name + "{" + ",".join([f'model="{model}"'] + [f'{k}="{v}"' for k, v in labels.items()]) + "}"
    return metrics.get(key)


class SeveralModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tmp = server_harness.TMP.name
        # Different shapes, so different texts: "small" (2 layers) and "large" (3 layers, 4 KV heads).
        cls.small = server_harness.synth(os.path.join(tmp, "small.gguf"), 512, layers=2)
        cls.large = server_harness.synth(os.path.join(tmp, "large.gguf"), 512, layers=3, kv_heads=4)
        budget = os.path.getsize(cls.large) + (6 << 20)  # one model's weights and 4 MiB pool, not two
        cls.config = models_config("models.toml", {"small": (cls.small, 'aliases = ["tiny"]\npreload = true'), "large": (cls.large, "")},
                                   f'memory_budget = {budget}\nmodel_swap_wait = 30')
        cls.server = LoomServer(cls.config, None)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def complete(self, model, prompt="hello world", stream=False, client=None):
        client = client or self.client
        served = {"tiny": "small"}.get(model, model)  # responses name the model an alias stands for
        kw = dict(model=model, prompt=prompt, max_tokens=12, temperature=0)
        if not stream:
            reply = client.completions.create(**kw)
            self.assertEqual(reply.model, served)
            return reply.choices[0].text
        text = ""
        for chunk in client.completions.create(stream=True, **kw):
            self.assertEqual(chunk.model, served)
            text += chunk.choices[0].text if chunk.choices else ""
        return text

    def status(self):
        return {m.id: m.model_extra["status"]["value"] for m in self.client.models.list().data}

    def test_1_models_show_their_state(self):
        status = self.status()
        self.assertEqual(status["small"], "loaded")
        self.assertEqual(status["tiny"], "loaded")  # the alias
        self.assertIn(status["large"], ("unloaded", "loaded"))
        self.assertEqual(self.client.models.retrieve("large").id, "large")

    def test_2_each_model_answers_as_it_does_alone(self):
        alone = {}
        for name, path in (("small", self.small), ("large", self.large)):
            config = server_harness.write_config(f"alone-{name}.toml", kv_memory=KV_MEMORY)
            server = LoomServer(config, path, ["--model-name", name])
            try:
                client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
                alone[name] = self.complete(name, client=client)
            finally:
                server.terminate()
        self.assertNotEqual(alone["small"], alone["large"])
        before = self.server.metrics()
        for name in ("small", "large", "small", "large"):  # each turn swaps the models
            self.assertEqual(self.complete(name), alone[name], name)
            self.assertEqual(self.status()[name], "loaded")
        self.assertEqual(self.complete("tiny"), alone["small"])  # an alias answers as its model
        after = self.server.metrics()
        for name in ("small", "large"):
            loads = series(after, "loom_model_loads_total", name) - (series(before, "loom_model_loads_total", name) or 0)
            unloads = series(after, "loom_model_unloads_total", name, reason="budget") - \
                (series(before, "loom_model_unloads_total", name, reason="budget") or 0)
            self.assertGreaterEqual(loads, 2, name)
            self.assertGreaterEqual(unloads, 1, name)
        loaded = [name for name in ("small", "large") if series(after, "loom_model_loaded", name) == 1]
        self.assertEqual(len(loaded), 1, after)  # the budget holds one

    def test_3_interleaved_requests_to_both_are_all_answered(self):
        expected = {name: self.complete(name) for name in ("small", "large")}
        jobs = [("small" if i % 2 == 0 else "large", i % 3 == 0) for i in range(24)]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            texts = list(pool.map(lambda job: (job[0], self.complete(job[0], stream=job[1])), jobs))
        self.assertEqual(len(texts), len(jobs))
        for name, text in texts:
            self.assertEqual(text, expected[name], name)
        m = self.server.wait_kv_free()
        for name in ("small", "large"):
            used = series(m, "loom_kv_blocks_used", name)
            self.assertIn(used, (None, 0.0), name)  # None: that model is not in memory now
            self.assertEqual(series(m, "loom_model_active_requests", name), 0.0)
        self.assertEqual(m["loom_kv_blocks_used"], 0.0)
        self.assertEqual(m["loom_server_queue_depth"], 0.0)

    def test_4_unknown_model_is_a_404_naming_the_models(self):
        with self.assertRaises(openai.NotFoundError) as caught:
            self.complete("nope")
        message = str(caught.exception)
        for name in ("small", "tiny", "large"):
            self.assertIn(f"'{name}'", message)


class BusyAndIdleTest(unittest.TestCase):
    def test_busy_models_give_503_with_retry_after_never_a_hang(self):
        tmp = server_harness.TMP.name
        slow = server_harness.synth(os.path.join(tmp, "slow.gguf"), 4096, layers=4)
        other = server_harness.synth(os.path.join(tmp, "other.gguf"), 512, layers=2)
        budget = os.path.getsize(slow) + (6 << 20)
        config = models_config("busy.toml", {"slow": (slow, "preload = true"), "other": (other, "")},
                               f"memory_budget = {budget}\nmodel_swap_wait = 0")
        server = LoomServer(config, None)
        try:
            long_reply = {}
            body = {"model": "slow", "prompt": "hello", "max_tokens": 4000, "temperature": 0, "ignore_eos": True}
            # A generous timeout: 4000 tokens take a minute or more on a loaded 2-core machine.
            worker = threading.Thread(target=lambda: long_reply.update(r=server.request("POST", "/v1/completions", body, timeout=600)))
            worker.start()
            deadline = time.time() + 30
            while series(server.metrics(), "loom_num_requests_running", "slow") != 1 and time.time() < deadline:
                time.sleep(0.01)
            status, headers, data = server.request("POST", "/v1/completions", {"model": "other", "prompt": "hi", "max_tokens": 4})
            still_running = worker.is_alive()
            worker.join(600)
            self.assertTrue(still_running, "the long request ended before the other model was asked for")
            self.assertEqual(status, 503, data)
            self.assertGreaterEqual(int(headers["Retry-After"]), 1)
            self.assertIn(b"model_swap_wait", data)
            self.assertEqual(long_reply["r"][0], 200)  # the busy model's request was not disturbed
            status, _, data = server.request("POST", "/v1/completions", {"model": "other", "prompt": "hi", "max_tokens": 4})
            self.assertEqual(status, 200, data)  # now the resident one is idle: swapped
            m = server.metrics()
            self.assertEqual(series(m, "loom_model_unloads_total", "slow", reason="budget"), 1.0)
            self.assertEqual(series(m, "loom_model_loaded", "slow"), 0.0)
        finally:
            server.terminate()

    def test_run_time_adapters_come_back_with_their_model(self):
        tmp = server_harness.TMP.name
        base = server_harness.synth(os.path.join(tmp, "adapted.gguf"), 512, layers=2)
        other = server_harness.synth(os.path.join(tmp, "evicting.gguf"), 512, layers=3, kv_heads=4)
        adapter = os.path.join(tmp, "runtime-adapter.gguf")
        done = server_harness.run_loom("gguf", "synth-lora", "--model", base, "--rank", "8", "--seed", "9", "-o", adapter)
        self.assertEqual(done.returncode, 0, done.stderr)
        budget = os.path.getsize(other) + (6 << 20)  # one model at a time
        config = models_config("adapters.toml", {"base": (base, "preload = true"), "other": (other, "")},
                               f"memory_budget = {budget}\nmodel_swap_wait = 30\nenable_lora_loading = true")
        with open(config, "a") as f:
            f.write("\n[model]\nmax_loras = 2\nmax_lora_rank = 16\n")
        server = LoomServer(config, None)

        def complete(model):
            status, _, data = server.request("POST", "/v1/completions", {"model": model, "prompt": "hello world", "max_tokens": 12,
                                                                        "temperature": 0})
            self.assertEqual(status, 200, data)
            return json.loads(data)["choices"][0]["text"]

        try:
            status, _, data = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "ad", "lora_path": adapter})
            self.assertEqual(status, 200, data)
            through_adapter, plain = complete("ad"), complete("base")
            self.assertNotEqual(through_adapter, plain)  # the adapter changes the answer
            complete("other")  # the budget holds one model: "base" is unloaded
            self.assertEqual(series(server.metrics(), "loom_model_loaded", "base"), 0.0)
            status, _, data = server.request("POST", "/v1/completions", {"model": "nope", "prompt": "x"})
            self.assertEqual(status, 404, data)
            self.assertIn("'ad'", json.loads(data)["error"]["message"])  # the unloaded model's adapter is still served
            self.assertEqual(complete("ad"), through_adapter)  # naming the adapter loads its model, adapter and all
            self.assertEqual(series(server.metrics(), "loom_model_loads_total", "base"), 2.0)
            status, _, data = server.request("POST", "/v1/unload_lora_adapter", {"lora_name": "ad"})
            self.assertEqual(status, 200, data)
            complete("other")
            status, _, data = server.request("POST", "/v1/completions", {"model": "ad", "prompt": "x", "max_tokens": 2})
            self.assertEqual(status, 404, data)  # unloaded adapters are forgotten
        finally:
            server.terminate()

    def test_idle_models_are_unloaded(self):
        tmp = server_harness.TMP.name
        model = server_harness.synth(os.path.join(tmp, "idle.gguf"), 512)
        config = models_config("idle.toml", {"idle": (model, "")}, "idle_unload = 0.5")
        server = LoomServer(config, None)
        try:
            status, _, data = server.request("POST", "/v1/completions", {"model": "idle", "prompt": "hi", "max_tokens": 4})
            self.assertEqual(status, 200, data)
            deadline = time.time() + 10
            while series(server.metrics(), "loom_model_loaded", "idle") != 0 and time.time() < deadline:
                time.sleep(0.1)
            m = server.metrics()
            self.assertEqual(series(m, "loom_model_loaded", "idle"), 0.0)
            self.assertEqual(series(m, "loom_model_unloads_total", "idle", reason="idle"), 1.0)
            _, cards = server.json("GET", "/v1/models")
            self.assertEqual(cards["data"][0]["status"]["value"], "unloaded")
            status, _, data = server.request("POST", "/v1/completions", {"model": "idle", "prompt": "hi", "max_tokens": 4})
            self.assertEqual(status, 200, data)  # and loaded again on demand
        finally:
            server.terminate()

    def test_a_model_larger_than_the_budget_is_refused_at_start_up(self):
        tmp = server_harness.TMP.name
        model = server_harness.synth(os.path.join(tmp, "big.gguf"), 512)
        config = models_config("small-budget.toml", {"big": (model, "")}, 'memory_budget = "2MiB"')
        done = server_harness.run_loom("serve", "--config", config, "--port", "0", timeout=60)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("memory_budget", done.stderr)
        self.assertIn("'big'", done.stderr)
        self.assertTrue(re.search(r"2\.0 MiB", done.stderr), done.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + UNITTEST_ARGS)
