#!/usr/bin/env python3
"""Issue 38: XLM-RoBERTa encoders (multilingual E5, BGE-M3) served from their Hugging Face folders.

scripts/make_encoder_checkpoint.py writes a synthetic XLM-RoBERTa folder as sentence-transformers models
publish them, with the real XLM-RoBERTa vocabulary (nomic-embed-text-v2-moe's, one of llama.cpp's
vocab suites that setup installs) as tokenizer.json: a unigram model, its Precompiled character map,
Metaspace, and the <s> ... </s> template. `loom serve --model DIR` must tokenize as `tokenizers` does,
number positions from pad_token_id + 1 as RoBERTa does, and embed within a cosine of 1 - 1e-6 of a
numpy XLM-RoBERTa over the same safetensors (bert_reference.py); `loom convert` writes the folder as
llama.cpp's converter writes it (position rows past the padding id, a t5 vocabulary), serving the same
vectors. Skips (77) without the suite, tokenizers, safetensors, numpy or gguf.
usage: test_hf_encoders.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import os
import subprocess
import sys
import unittest


try:
    import gguf  # noqa: F401 (the generator reads the suite with it)
    import numpy as np
    import safetensors  # noqa: F401
    import tokenizers  # noqa: F401
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

VOCAB = os.path.expanduser("~/.cache/loom/vocab/ggml-vocab-nomic-bert-moe.gguf")
if not os.path.exists(VOCAB):
    print(f"skipped: llama.cpp's vocab suites are not in {os.path.dirname(VOCAB)} (scripts/setup.sh installs them)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bert_reference  # noqa: E402
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()

TEXTS = [
    "query: how much protein should a female eat",
    "passage: As a general guideline, the CDC's average requirement of protein for women ages 19 to 70 is 46 grams per day.",
    "Die Würde des Menschen ist unantastbar.",
    "人人生而自由，在尊严和权利上一律平等。",
    "  spaced   out  text with a trailing space ",
]


def embeddings(server, texts):
    status, body = server.json("POST", "/v1/embeddings", {"input": texts, "model": "xlm-roberta"})
    if status != 200:
        raise AssertionError(body)
    return [np.array(d["embedding"]) for d in body["data"]], body["usage"]["prompt_tokens"]


class XlmRobertaFolderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = os.path.join(server_harness.TMP.name, "xlm-roberta")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "scripts", "make_encoder_checkpoint.py"), "--vocab-from", VOCAB,
                        "--out", cls.folder], check=True)
        cls.reference = bert_reference.Bert(cls.folder)
        cls.config = server_harness.write_config("hf-xlm-roberta.toml")

    def test_the_folder_embeds_as_a_numpy_xlm_roberta(self):
        server = LoomServer(self.config, self.folder)
        try:
            got, prompt_tokens = embeddings(server, TEXTS)
            for text in TEXTS:
                status, body = server.json("POST", "/tokenize", {"content": text, "add_special": True})
                self.assertEqual(body["tokens"], self.reference.tokens(text), text)
        finally:
            server.terminate()
        self.assertEqual(prompt_tokens, sum(len(self.reference.tokens(t)) for t in TEXTS))
        for text, vector in zip(TEXTS, got):
            want = self.reference.embed(self.reference.tokens(text))
            self.assertGreater(float(vector @ want / np.linalg.norm(vector)), 1 - 1e-6, text)

    def test_convert_writes_the_folder_as_llama_cpps_converter_does(self):
        out = os.path.join(server_harness.TMP.name, "xlm-roberta.gguf")
        done = server_harness.run_loom("convert", self.folder, out, "--type", "F32", "--force")
        self.assertEqual(done.returncode, 0, done.stderr)
        info = server_harness.run_loom("gguf", "info", out)
        self.assertRegex(info.stdout, r"tokenizer\.ggml\.model\s+string\s+\"t5\"")
        self.assertRegex(info.stdout, r"bert\.context_length\s+uint32\s+128\b")  # 130 positions, 2 before the first
        self.assertRegex(info.stdout, r"position_embd\.weight\s+F32\s+32 x 128\b")
        vectors = {}
        for model in (self.folder, out):
            server = LoomServer(self.config, model)
            try:
                vectors[model] = embeddings(server, TEXTS)[0]
            finally:
                server.terminate()
        for a, b in zip(vectors[self.folder], vectors[out]):
            self.assertGreater(float(a @ b), 1 - 1e-6)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
