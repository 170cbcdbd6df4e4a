#!/usr/bin/env python3
"""Issue 40: the samplers llama.cpp users tune, over HTTP, through the official `openai` client.

On a synthetic llama (greedy unless said otherwise):
  - logit_bias (OpenAI's token-id map) of +100 makes a token the only answer, -100 bans the token
    greedy would pick, and llama.cpp's [[id, false]] pairs ban too; a token outside the vocabulary or
    a value out of range is a 400 naming logit_bias;
  - DRY takes away the token that would extend a long repeat of the prompt, and a sequence breaker at
    the repeat's end gives it back;
  - vLLM's return_tokens_as_token_ids names the logprobs' tokens "token_id:N" (how the cases read ids);
  - top_n_sigma, XTC and Mirostat (v1 and v2) sample, seeded, reproducibly; XTC at probability 1
    never picks the token greedy picks when another one is at least as likely as the threshold;
  - a server whose [sampler] chain lacks a stage refuses a request that needs it, naming the stage.
Skips (77) without the `openai` package.
usage: test_tuned_sampling.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import os
import sys
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

PROMPT = [5, 17, 42, 99, 7]


class TunedSamplingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = server_harness.synth(os.path.join(server_harness.TMP.name, "tuned.gguf"), 512)
        cls.server = LoomServer(server_harness.write_config("tuned.toml"), cls.model, ["--model-name", "m"])
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def ids(self, max_tokens=24, **extra):
        body = {"model": "m", "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                "return_tokens_as_token_ids": True, "logprobs": 0}
        body.update(extra)
        status, out = self.server.json("POST", "/v1/completions", body)
        self.assertEqual(status, 200, out)
        return [int(t.split(":")[1]) for t in out["choices"][0]["logprobs"]["tokens"]]

    def test_logit_bias_forces_and_bans_tokens(self):
        greedy = self.ids(4)
        forced = self.ids(4, logit_bias={"300": 100})
        self.assertEqual(forced, [300] * 4)
        banned = self.ids(4, logit_bias={str(greedy[0]): -100})
        self.assertNotEqual(banned[0], greedy[0])
        banned_pairs = self.ids(4, logit_bias=[[greedy[0], False]])
        self.assertEqual(banned_pairs, banned)
        # Through the official client too.
        reply = self.client.completions.create(model="m", prompt=PROMPT, max_tokens=3, temperature=0, logit_bias={"300": 100})
        self.assertEqual(reply.usage.completion_tokens, 3)

    def test_logit_bias_errors_name_the_field(self):
        for bias in ({"512": 1}, {"abc": 1}, {"3": 101}, [[1]]):
            status, out = self.server.json("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "logit_bias": bias})
            self.assertEqual((status, out["error"]["param"]), (400, "logit_bias"), (bias, out))

    def test_dry_penalises_the_token_that_extends_a_repeat(self):
        # The prompt repeats "A B C D E" and ends "A B C": D would extend a repeat of 13 tokens. A bias
        # makes D greedy's pick; DRY (2 * 2^(13 - 2)) takes it away; a breaker at C gives it back.
        a, b, c, d, e = 21, 22, 23, 24, 25
        prompt = [a, b, c, d, e] * 3 + [a, b, c]
        base = {"prompt": prompt, "logit_bias": {str(d): 15}}
        self.assertEqual(self.ids(1, **base), [d])
        dry = dict(base, dry_multiplier=2.0, dry_base=2.0, dry_allowed_length=2)
        self.assertNotEqual(self.ids(1, **dry), [d])
        status, out = self.server.json("POST", "/detokenize", {"tokens": [c]})
        self.assertEqual(status, 200, out)
        self.assertTrue(out["content"], "token C has no text to break on")
        self.assertEqual(self.ids(1, **dict(dry, dry_sequence_breakers=[out["content"]])), [d])

    def test_sampled_stages_are_reproducible_with_a_seed(self):
        for extra in ({"top_n_sigma": 1.0}, {"xtc_probability": 0.5, "xtc_threshold": 0.05}, {"mirostat": 1, "mirostat_tau": 3.0},
                      {"mirostat": 2, "mirostat_tau": 3.0, "mirostat_eta": 0.2}):
            a = self.ids(16, temperature=1.0, seed=7, **extra)
            b = self.ids(16, temperature=1.0, seed=7, **extra)
            self.assertEqual(a, b, extra)
            self.assertEqual(len(a), 16)

    def test_xtc_at_probability_one_avoids_the_top_choice(self):
        greedy = self.ids(1)
        xtc = self.ids(1, xtc_probability=1.0, xtc_threshold=0.0)  # every token is above 0: all but the least likely go
        self.assertNotEqual(xtc[0], greedy[0])

    def test_out_of_range_values_name_the_field(self):
        for field, value in (("xtc_probability", 1.5), ("mirostat", 3), ("dry_base", 1.0), ("dry_penalty_last_n", -2),
                             ("dry_sequence_breakers", "x")):
            status, out = self.server.json("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, field: value})
            self.assertEqual((status, out["error"]["param"]), (400, field), (field, out))


class ChainWithoutTheStagesTest(unittest.TestCase):
    def test_a_stage_the_chain_lacks_is_refused_by_name(self):
        model = server_harness.synth(os.path.join(server_harness.TMP.name, "chain.gguf"), 512)
        config = server_harness.write_config("chain.toml")
        with open(config, "a") as f:
            f.write('\n[sampler]\nchain = ["top_k", "temperature"]\n')
        server = LoomServer(config, model)
        try:
            for field, value, stage in (("logit_bias", {"3": 5}, "logit_bias"), ("dry_multiplier", 0.8, "dry"),
                                        ("xtc_probability", 0.5, "xtc"), ("top_n_sigma", 1.0, "top_n_sigma")):
                status, out = server.json("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 2, field: value})
                self.assertEqual(status, 400, out)
                self.assertEqual(out["error"]["param"], field)
                self.assertIn(f"'{stage}' stage", out["error"]["message"])
        finally:
            server.terminate()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + UNITTEST_ARGS)
