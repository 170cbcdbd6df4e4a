#!/usr/bin/env python3
"""Issue 40: fill-in-the-middle, as code editors ask for it.

On the default chat model (Qwen2.5-Coder 0.5B Instruct, which has Qwen's FIM tokens), through the
official `openai` client's completions with `suffix` and through llama.cpp's POST /infill:
  - the prompt is laid out as llama.cpp lays it out ([repo]myproject, [file_sep] per other file,
    [prefix] code [suffix] code [middle]), checked token by token through /v1/completions/render;
  - a function body completed between a prefix and a suffix (greedy, n_indent as llama.vim sends it)
    makes the whole file parse with Python's `ast`, on several functions;
  - /infill answers in llama.cpp's shape, whole and streamed, with input_extra files in the prompt;
  - a model without FIM tokens gets a 400 that says so; token prompts with a suffix, and /infill
    without input_prefix, are 400s naming the field.
Skips (77) without the `openai` package; the chat-model cases skip when it is not installed.
usage: test_fim.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import ast
import json
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

# Cursor inside a function body: the prefix ends at the body's indentation, the suffix is what follows.
BODIES = [
    ("def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n", 4),
    ("def is_even(n):\n    ", "\n\nprint(is_even(4))\n", 4),
    ("import math\n\ndef circle_area(r):\n    ", '\n\nif __name__ == "__main__":\n    print(circle_area(2.0))\n', 4),
    ("class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        ",
     "\n\n    def size(self):\n        return len(self.items)\n", 8),
]


class FimOnTheChatModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path = server_harness.installed_model("chat-model.txt")
        if cls.path is None:
            raise unittest.SkipTest("the chat model is not installed (scripts/setup.sh)")
        cls.server = LoomServer(server_harness.write_config("fim.toml", kv_memory="64MiB"), cls.path, ["--model-name", "coder"])
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def token(self, text):
        status, out = self.server.json("POST", "/tokenize", {"content": text, "add_special": False})
        self.assertEqual(status, 200, out)
        self.assertEqual(len(out["tokens"]), 1, (text, out))
        return out["tokens"][0]

    def ids(self, text):
        return self.server.json("POST", "/tokenize", {"content": text, "add_special": False})[1]["tokens"]

    def test_the_prompt_is_laid_out_as_llama_cpp_lays_it_out(self):
        prefix, suffix = "def f(x):\n    return ", "\n\nprint(f(2))\n"
        status, out = self.server.json("POST", "/v1/completions/render", {"prompt": prefix, "suffix": suffix})
        self.assertEqual(status, 200, out)
        expected = ([self.token("<|repo_name|>")] + self.ids("myproject\n") + [self.token("<|file_sep|>")] + self.ids("filename\n") +
                    [self.token("<|fim_prefix|>")] + self.ids(prefix) + [self.token("<|fim_suffix|>")] + self.ids(suffix) +
                    [self.token("<|fim_middle|>")])
        self.assertEqual(out["token_ids"], expected)

    def test_a_function_body_between_prefix_and_suffix_parses(self):
        for prefix, suffix, indent in BODIES:
            reply = self.client.completions.create(model="coder", prompt=prefix, suffix=suffix, max_tokens=64, temperature=0,
                                                   extra_body={"n_indent": indent}, stop=["```"])
            middle = reply.choices[0].text
            print(f"middle: {middle!r}")
            self.assertTrue(middle.strip(), f"no body for {prefix!r}")
            ast.parse(prefix + middle + suffix)  # raises SyntaxError when the middle does not fit

    def test_infill_answers_in_llama_cpp_shape_whole_and_streamed(self):
        prefix, suffix, indent = BODIES[0]
        extra = [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}]
        body = {"input_prefix": prefix, "input_suffix": suffix, "input_extra": extra, "n_predict": 32, "n_indent": indent,
                "temperature": 0}
        status, whole = self.server.json("POST", "/infill", body)
        self.assertEqual(status, 200, whole)
        self.assertTrue(whole["stop"])
        self.assertGreater(whole["tokens_predicted"], 0)
        ast.parse(prefix + whole["content"] + suffix)
        # The other file sits in the prompt: more tokens evaluated than without it.
        status, plain = self.server.json("POST", "/infill", dict(body, input_extra=[]))
        self.assertGreater(whole["tokens_evaluated"], plain["tokens_evaluated"] + len(self.ids(extra[0]["text"])))

        status, _, data = self.server.request("POST", "/infill", dict(body, stream=True))
        self.assertEqual(status, 200)
        events = [json.loads(line[len("data: "):]) for line in data.decode().splitlines() if line.startswith("data: ")]
        self.assertTrue(events and events[-1]["stop"] and not any(e["stop"] for e in events[:-1]), events)
        self.assertEqual("".join(e["content"] for e in events), whole["content"])

    def test_bad_requests_name_the_field(self):
        status, out = self.server.json("POST", "/infill", {"input_suffix": "x"})
        self.assertEqual((status, out["error"]["param"]), (400, "input_prefix"))
        status, out = self.server.json("POST", "/infill", {"input_prefix": "x", "input_suffix": "y", "input_extra": [{"file": 1}]})
        self.assertEqual((status, out["error"]["param"]), (400, "input_extra"))
        status, out = self.server.json("POST", "/v1/completions", {"prompt": [1, 2, 3], "suffix": "x"})
        self.assertEqual((status, out["error"]["param"]), (400, "suffix"))


class FimOnAModelWithoutFimTokens(unittest.TestCase):
    def test_a_model_without_fim_tokens_gets_a_400_that_says_so(self):
        model = server_harness.synth(os.path.join(server_harness.TMP.name, "nofim.gguf"), 512)
        server = LoomServer(server_harness.write_config("nofim.toml"), model)
        try:
            for path, body in (("/v1/completions", {"prompt": "def f():", "suffix": "\n"}),
                               ("/infill", {"input_prefix": "def f():", "input_suffix": "\n"})):
                status, out = server.json("POST", path, body)
                self.assertEqual(status, 400, out)
                self.assertIn("no fill-in-the-middle tokens", out["error"]["message"])
                self.assertIn("prefix, suffix, middle missing", out["error"]["message"])
        finally:
            server.terminate()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + UNITTEST_ARGS)
