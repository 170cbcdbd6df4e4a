#!/usr/bin/env python3
"""Embeddings through `loom serve` (issue 37): a synthetic bert model (the golden's, so the vectors can be
checked against llama.cpp's), driven by the official `openai` client and raw HTTP. Float and base64
vectors agree and match tests/golden/embed/bert-synth.json; `dimensions` cuts and renormalises;
token-id inputs work; every bad input is a 400 naming the field, and the server keeps serving; a chat
request to an embedding model is a 400 naming its task. Skips (77) without the `openai` package.

usage: test_embeddings.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import base64
import json
import math
import os
import struct
import subprocess
import sys
import unittest


try:
    import openai
except ImportError:
    print("skipped: the openai package is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness  # noqa: E402
from server_harness import TMP, LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = json.load(open(os.path.join(ROOT, "tests", "golden", "embed", "bert-synth.json")))


def normalised(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def cosine(a, b):
    return sum(x * y for x, y in zip(normalised(a), normalised(b)))


def serve_golden(name):
    """The golden's synthetic model, rewritten by `loom gguf synth` and served: (golden, server)."""
    golden = json.load(open(os.path.join(ROOT, "tests", "golden", "embed", name + ".json")))
    model = os.path.join(TMP.name, name + ".gguf")
    subprocess.run([ARGS.loom, "gguf", "synth", *golden["model"]["args"], "-o", model], check=True, stdout=subprocess.DEVNULL)
    return golden, LoomServer(server_harness.write_config(name + ".toml"), model)


class EmbeddingServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        model = os.path.join(TMP.name, "bert-synth.gguf")
        subprocess.run([ARGS.loom, "gguf", "synth", *GOLDEN["model"]["args"], "-o", model], check=True, stdout=subprocess.DEVNULL)
        config = server_harness.write_config("embeddings.toml", extra="max_embedding_inputs = 16")
        cls.server = LoomServer(config, model)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)
        cls.texts = [i["text"] for i in GOLDEN["inputs"]]

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_float_and_base64_match_llama_cpp(self):
        floats = self.client.embeddings.create(model="bert-synth", input=self.texts)
        self.assertEqual([d.index for d in floats.data], list(range(len(self.texts))))
        self.assertEqual(floats.usage.prompt_tokens, sum(len(i["tokens"]) for i in GOLDEN["inputs"]))
        for d, want in zip(floats.data, GOLDEN["inputs"]):
            self.assertEqual(len(d.embedding), 128)
            self.assertAlmostEqual(math.sqrt(sum(x * x for x in d.embedding)), 1.0, places=5)
            self.assertGreater(cosine(d.embedding, want["embedding"]), 0.9999)
        # base64 through the raw API (the SDK would decode it): the same float32 values, little-endian.
        status, body = self.server.json("POST", "/v1/embeddings", {"input": self.texts, "encoding_format": "base64"})
        self.assertEqual(status, 200)
        for d, f in zip(body["data"], floats.data):
            raw = base64.b64decode(d["embedding"])
            self.assertEqual(list(struct.unpack("<%df" % (len(raw) // 4), raw)), [struct.unpack("<f", struct.pack("<f", x))[0] for x in f.embedding])
        # And through the SDK's own base64 path.
        sdk = self.client.embeddings.create(model="bert-synth", input=self.texts[:2], encoding_format="base64")
        self.assertEqual(len(sdk.data), 2)

    def test_tokens_dimensions_and_truncation(self):
        ids = GOLDEN["inputs"][1]["tokens"]
        by_ids = self.client.embeddings.create(model="bert-synth", input=[ids]).data[0].embedding
        by_text = self.client.embeddings.create(model="bert-synth", input=GOLDEN["inputs"][1]["text"]).data[0].embedding
        self.assertGreater(cosine(by_ids, by_text), 0.999999)
        short = self.client.embeddings.create(model="bert-synth", input="hello world", dimensions=32).data[0].embedding
        full = self.client.embeddings.create(model="bert-synth", input="hello world").data[0].embedding
        self.assertEqual(len(short), 32)
        self.assertGreater(cosine(short, full[:32]), 0.999999)
        self.assertAlmostEqual(math.sqrt(sum(x * x for x in short)), 1.0, places=5)
        long_input = [101] + [264] * 200 + [102]  # past the 128-token context
        status, body = self.server.json("POST", "/v1/embeddings", {"input": [long_input]})
        self.assertEqual(status, 400)
        self.assertIn("more than the 128", body["error"]["message"])
        status, body = self.server.json("POST", "/v1/embeddings", {"input": [long_input], "truncate_prompt_tokens": 100})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["usage"]["prompt_tokens"], 100)

    def test_tokenize_gives_the_ids_an_input_costs(self):
        want = GOLDEN["inputs"][2]
        status, body = self.server.json("POST", "/tokenize", {"content": want["text"], "add_special": True})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["tokens"], want["tokens"])
        status, body = self.server.json("POST", "/detokenize", {"tokens": want["tokens"][1:-1]})
        self.assertEqual(status, 200, body)
        # WordPiece lowercases and writes punctuation as its own word: the same letters, spaced its way.
        self.assertEqual(body["content"].replace(" ", ""), want["text"].lower().replace(" ", ""))
        status, body = self.server.json("POST", "/detokenize", {"tokens": [800]})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["param"], "tokens")

    def test_concurrent_requests_get_their_own_vectors(self):
        # Requests that arrive together run in shared batches; each still gets exactly its own vectors.
        import concurrent.futures
        def one(i):
            text = self.texts[i % len(self.texts)]
            return i, self.client.embeddings.create(model="bert-synth", input=text).data[0].embedding
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for i, got in pool.map(one, range(24)):
                self.assertGreater(cosine(got, GOLDEN["inputs"][i % len(self.texts)]["embedding"]), 0.9999)

    def test_bad_inputs_name_the_field(self):
        cases = [
            ({"input": ""}, "input", "empty string"),
            ({"input": []}, "input", "empty array"),
            ({"input": ["ok", ""]}, "input[1]", "empty string"),
            ({"input": ["x"] * 17}, "input", "more than the 16"),
            ({"input": [[101, 900000]]}, "input[0]", "outside the vocabulary"),
            ({"input": "hi", "encoding_format": "int8"}, "encoding_format", "\"float\" or \"base64\""),
            ({"input": "hi", "dimensions": 129}, "dimensions", "1 to 128"),
            ({"input": 7}, "input", "must be a string"),
        ]
        for body, param, words in cases:
            status, answer = self.server.json("POST", "/v1/embeddings", body)
            self.assertEqual(status, 400, (body, answer))
            self.assertEqual(answer["error"]["param"], param, answer)
            self.assertIn(words, answer["error"]["message"])
        status, _, _ = self.server.request("POST", "/v1/embeddings", "{not json")
        self.assertEqual(status, 400)
        with self.assertRaises(openai.BadRequestError) as refused:
            self.client.chat.completions.create(model="bert-synth", messages=[{"role": "user", "content": "hi"}])
        self.assertIn("embedding model", refused.exception.message)
        status, models = self.server.json("GET", "/v1/models")
        self.assertEqual(models["data"][0]["loom"]["task"], "embedding")
        status, answer = self.server.json("POST", "/v1/rerank", {"query": "q", "documents": ["a"]})
        self.assertEqual(status, 400)
        self.assertIn("embedding model", answer["error"]["message"])
        # Still serving.
        self.assertEqual(len(self.client.embeddings.create(model="bert-synth", input="dog").data), 1)


class EncoderFamiliesServerTest(unittest.TestCase):
    """EmbeddingGemma (symmetric window, dense projections) through the official client."""

    def test_gemma_embedding_matches_llama_cpp(self):
        golden, server = serve_golden("gemma-embedding-synth")
        try:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
            answer = client.embeddings.create(model="gemma-embedding-synth", input=[i["text"] for i in golden["inputs"]])
            self.assertEqual(len(answer.data), len(golden["inputs"]))
            for d, want in zip(answer.data, golden["inputs"]):
                self.assertGreater(cosine(d.embedding, want["embedding"]), 0.9999)
        finally:
            server.terminate()


class RerankServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.golden, cls.server = serve_golden("bert-reranker-synth")

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_rerank_orders_as_llama_cpp(self):
        docs = [i["text"] for i in self.golden["inputs"]]
        want = [i["embedding"][0] for i in self.golden["inputs"]]
        want_order = sorted(range(len(docs)), key=lambda i: -want[i])
        for path in ("/v1/rerank", "/rerank"):
            status, body = self.server.json("POST", path, {"query": self.golden["query"], "documents": docs})
            self.assertEqual(status, 200, body)
            self.assertEqual([r["index"] for r in body["results"]], want_order)
            for r in body["results"]:
                self.assertAlmostEqual(r["relevance_score"], want[r["index"]], delta=2e-3)
                self.assertEqual(r["document"]["text"], docs[r["index"]])
        status, body = self.server.json("POST", "/v1/rerank", {"query": self.golden["query"], "documents": docs, "top_n": 2,
                                                               "return_documents": False})
        self.assertEqual([r["index"] for r in body["results"]], want_order[:2])
        self.assertNotIn("document", body["results"][0])

    def test_score_pairs_as_rerank(self):
        docs = [i["text"] for i in self.golden["inputs"]]
        want = [i["embedding"][0] for i in self.golden["inputs"]]
        status, body = self.server.json("POST", "/v1/score", {"text_1": self.golden["query"], "text_2": docs})
        self.assertEqual(status, 200, body)
        self.assertEqual([d["index"] for d in body["data"]], list(range(len(docs))))
        for d in body["data"]:
            self.assertAlmostEqual(d["score"], want[d["index"]], delta=2e-3)
        status, body = self.server.json("POST", "/score", {"text_1": [self.golden["query"]] * 2, "text_2": docs[:2]})
        self.assertEqual(status, 200, body)
        status, body = self.server.json("POST", "/v1/score", {"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["param"], "text_1")

    def test_bad_rerank_requests_name_the_field(self):
        for body, param in [({"documents": ["a"]}, "query"), ({"query": "q", "documents": []}, "documents"),
                            ({"query": "q", "documents": ["a", ""]}, "documents[1]"), ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n")]:
            status, answer = self.server.json("POST", "/v1/rerank", body)
            self.assertEqual(status, 400, answer)
            self.assertEqual(answer["error"]["param"], param)
        status, answer = self.server.json("POST", "/v1/embeddings", {"input": "hello"})
        self.assertEqual(status, 400)
        self.assertIn("reranker", answer["error"]["message"])


class DecoderEmbeddingServerTest(unittest.TestCase):
    """A decoder used as an embedder: by its file's pooling type (Qwen3-Embedding's way), or by [model] pooling."""

    def test_pooling_from_the_file_matches_llama_cpp(self):
        golden, server = serve_golden("qwen3-embed-synth")
        try:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0)
            answer = client.embeddings.create(model="qwen3-embed-synth", input=[i["text"] for i in golden["inputs"]])
            for d, want in zip(answer.data, golden["inputs"]):
                self.assertGreater(cosine(d.embedding, want["embedding"]), 0.9999)
            with self.assertRaises(openai.BadRequestError):
                client.chat.completions.create(model="qwen3-embed-synth", messages=[{"role": "user", "content": "hi"}])
        finally:
            server.terminate()

    def test_qwen3_reranker_orders_as_llama_cpp(self):
        # Qwen3-Reranker: the pairs laid out by the file's rerank template; the score is P(yes).
        golden, server = serve_golden("qwen3-reranker-synth")
        try:
            docs = [i["text"] for i in golden["inputs"]]
            want = [i["embedding"][0] for i in golden["inputs"]]
            status, body = server.json("POST", "/v1/rerank", {"query": golden["query"], "documents": docs})
            self.assertEqual(status, 200, body)
            self.assertEqual([r["index"] for r in body["results"]], sorted(range(len(docs)), key=lambda i: -want[i]))
            for r in body["results"]:
                self.assertAlmostEqual(r["relevance_score"], want[r["index"]], delta=5e-3)
            self.assertEqual(body["usage"]["prompt_tokens"], sum(len(i["tokens"]) for i in golden["inputs"]))
        finally:
            server.terminate()

    def test_pooling_from_the_config(self):
        model = os.path.join(TMP.name, "qwen3-plain.gguf")
        subprocess.run([ARGS.loom, "gguf", "synth", "--arch", "qwen3", "--layers", "2", "--dim", "64", "-o", model], check=True,
                       stdout=subprocess.DEVNULL)
        config = server_harness.write_config("decoder-mean.toml")
        with open(config, "a") as f:
            f.write('\n[model]\npooling = "mean"\n')
        server = LoomServer(config, model)
        try:
            status, body = server.json("POST", "/v1/embeddings", {"input": ["hello world", "the cat"]})
            self.assertEqual(status, 200, body)
            self.assertEqual([len(d["embedding"]) for d in body["data"]], [64, 64])
            status, models = server.json("GET", "/v1/models")
            self.assertEqual(models["data"][0]["loom"]["pooling"], "mean")
        finally:
            server.terminate()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
