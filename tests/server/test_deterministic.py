"""[engine] deterministic on the default model (Gemma 3 270M, Q4_K_M) through `loom serve`: 16 seeded,
sampled requests give the same text alone, one after another, and all at once beside unseeded
requests that come and go. Skips (77) when the default model is not installed (scripts/setup.sh).
"""
import json
import os
import sys
import threading
import time
import unittest

import server_harness
from server_harness import LoomServer

N_REQUESTS = 16
MAX_TOKENS = 24


def deterministic_config(name):
    path = server_harness.write_config(name, kv_memory="128MiB")
    with open(path) as f:
        text = f.read()
    # Prompts that arrive while others decode are cut into 16-token chunks: every part of the
    # batched run computes beside something else.
    text = text.replace("[server]", "[engine]\ndeterministic = true\n\n[server]")
    text = text.replace("max_num_seqs = 16", "max_num_seqs = 16\nprefill_tokens_while_decoding = 16")
    # A window ring per sequence (Gemma 3's sliding layers), so all 16 run at once.
    text = text.replace("block_size = 16", "block_size = 16\nwindow_seqs = 16\nwindow_chunk_tokens = 64")
    with open(path, "w") as f:
        f.write(text)
    return path


PROMPTS = [f"Story {i}: once upon a time, in a land of" + " very" * (i % 6) + " far away," for i in range(N_REQUESTS)]


class DeterministicOnTheDefaultModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LoomServer(deterministic_config("deterministic.toml"), cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def complete(self, i, seed, max_tokens=MAX_TOKENS):
        body = {"prompt": PROMPTS[i % N_REQUESTS], "max_tokens": max_tokens, "temperature": 1.0, "top_p": 1.0,
                "top_k": 0, "min_p": 0.0}
        if seed is not None:
            body["seed"] = seed
        # A generous timeout: the batched phase answers its 22 requests together, and a loaded CI machine is slow.
        status, _, data = self.server.request("POST", "/v1/completions", body, timeout=600)
        answer = json.loads(data)
        self.assertEqual(status, 200, answer)
        return answer["choices"][0]["text"]

    def test_seeded_requests_agree_alone_and_in_mixed_batches(self):
        alone = [self.complete(i, 500 + i) for i in range(N_REQUESTS)]
        self.assertEqual(len(set(alone)), N_REQUESTS, "sampled answers should differ between requests")

        together, errors = [None] * N_REQUESTS, []

        def seeded(i):
            try:
                together[i] = self.complete(i, 500 + i)
            except Exception as e:  # reported below, with the others
                errors.append(e)

        def unseeded(j):
            time.sleep(0.1 * j)
            try:
                self.complete(j * 5, None, max_tokens=8 + 4 * j)
            except Exception as e:
                errors.append(e)

        before = self.server.metrics()
        threads = [threading.Thread(target=seeded, args=(i,)) for i in range(N_REQUESTS)]
        threads += [threading.Thread(target=unseeded, args=(j,)) for j in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        for i in range(N_REQUESTS):
            self.assertEqual(together[i], alone[i], f"request {i} changed in a batch")
        # They did run together: far fewer engine steps than tokens generated.
        after = self.server.metrics()
        steps = after["loom_engine_steps_total"] - before["loom_engine_steps_total"]
        tokens = after["loom_generation_tokens_total"] - before["loom_generation_tokens_total"]
        self.assertGreaterEqual(tokens, N_REQUESTS * MAX_TOKENS)
        self.assertLess(steps, tokens / 4, f"{steps} steps for {tokens} tokens: the requests were not batched")


if __name__ == "__main__":
    args, rest = server_harness.configure_from_argv()
    DeterministicOnTheDefaultModel.model = server_harness.installed_model("default-model.txt")
    if DeterministicOnTheDefaultModel.model is None:
        print("skipped: the default model is not installed (scripts/setup.sh installs it)")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0], *rest])
