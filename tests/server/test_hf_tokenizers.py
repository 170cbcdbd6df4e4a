#!/usr/bin/env python3
"""Issue 38: real vocabularies read from tokenizer.json give the ids Hugging Face's `tokenizers` gives.

For each of llama.cpp's vocab suites that setup installs (~/.cache/loom/vocab: GPT-2, Llama 3, Qwen2,
Qwen3.5 and StarCoder byte-level BPEs; Llama 2 and Phi-3 SentencePiece BPEs; XLM-RoBERTa's unigram
model, from nomic-embed-text-v2-moe; Gemma 4's, checked against the suite's published ids),
scripts/make_hf_checkpoint.py --vocab-from writes the vocabulary as its model publishes tokenizer.json
(the published pre-tokenizer; SentencePiece's pieces exported as transformers exports them) inside a
tiny model folder. `loom serve` reads the folder, and its /tokenize must give `tokenizers`' ids for
every text of the suite's .inp file and a multilingual corpus. The unigram vocabulary read from its GGUF
gives llama.cpp's ids (SentencePiece's own whitespace handling, which tokenizers' Metaspace differs
from on whitespace-only texts). Skips (77) without the suites,
tokenizers, safetensors, numpy or gguf.
usage: test_hf_tokenizers.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import json
import os
import subprocess
import sys
import unittest


try:
    import gguf  # noqa: F401 (the generator reads the suites with it)
    import numpy  # noqa: F401
    import safetensors  # noqa: F401
    from tokenizers import Tokenizer
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

SUITES = os.path.expanduser("~/.cache/loom/vocab")
# One per distinct pre-tokenizer (MPT's is GPT-2's, Refact's and Command-R's StarCoder's: all three
# measured equal too, left out to keep the test short).
VOCABS = ["gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder", "llama-spm", "phi-3", "nomic-bert-moe"]
# Suites without texts of their own borrow another's (nomic-embed-text-v2-moe: XLM-RoBERTa's unigram
# vocabulary of 250,048 pieces and its character map).
TEXTS_FROM = {"nomic-bert-moe": "llama-spm"}
if not all(os.path.exists(os.path.join(SUITES, f"ggml-vocab-{v}.gguf")) for v in VOCABS):
    print(f"skipped: llama.cpp's vocab suites are not in {SUITES} (scripts/setup.sh installs them)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()
GENERATOR = os.path.join(HERE, "..", "..", "scripts", "make_hf_checkpoint.py")

MULTILINGUAL = [
    "Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller staatlichen Gewalt.",
    "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de raison.",
    "Все люди рождаются свободными и равными в своем достоинстве и правах.",
    "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
    "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。",
    "모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다.",
    "كل الناس يولدون أحرارًا متساوين في الكرامة والحقوق.",
    "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है।",
    "Όλοι οι άνθρωποι γεννιούνται ελεύθεροι και ίσοι στην αξιοπρέπεια και τα δικαιώματα.",
    "ทุกคนเกิดมามีอิสระและเสมอภาคกันในศักดิ์ศรีและสิทธิ",
    "Mọi người sinh ra đều được tự do và bình đẳng về nhân phẩm và quyền lợi.",
    "for (int i = 0; i < 10; ++i) { sum += a[i] * 3.14159; }  // 1234567 tokens\n\tif x != y:\n\t\treturn None",
    "emoji 🦙🚀👍🏽 and combining e\u0301 and tabs\t\tand  double  spaces   end  ",
]


def texts_of(vocab):
    with open(os.path.join(SUITES, f"ggml-vocab-{TEXTS_FROM.get(vocab, vocab)}.gguf.inp"), encoding="utf-8") as f:
        raw = f.read()
    return raw.split("\n__ggml_vocab_test__\n")[:-1] + MULTILINGUAL


class RealVocabularyTest(unittest.TestCase):
    def test_tokenize_gives_the_tokenizers_ids(self):
        config = server_harness.write_config("hf-tokenizers.toml")
        for vocab in VOCABS:
            folder = os.path.join(server_harness.TMP.name, vocab)
            subprocess.run([sys.executable, GENERATOR, "--family", "qwen2", "--out", folder, "--vocab-from",
                            os.path.join(SUITES, f"ggml-vocab-{vocab}.gguf")], check=True)
            hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            server = LoomServer(config, folder)
            try:
                texts = texts_of(vocab)
                for text in texts:
                    status, body = server.json("POST", "/tokenize", {"content": text, "add_special": False})
                    self.assertEqual(status, 200, body)
                    self.assertEqual(body["tokens"], hf.encode(text, add_special_tokens=False).ids, f"{vocab}: {text!r}")
                    if vocab == "nomic-bert-moe":  # XLM-RoBERTa's template: <s> text </s>
                        status, body = server.json("POST", "/tokenize", {"content": text, "add_special": True})
                        self.assertEqual(body["tokens"], hf.encode(text).ids, f"{vocab} with special tokens: {text!r}")
            finally:
                server.terminate()

    def test_gemma4_vocabulary_gives_the_published_ids(self):
        # Gemma 4's 262,144 pieces and 514,906 merges as tokenizer.json (U+2581 for spaces, split at newline
        # runs, byte fallback) in a tiny gemma4_text folder, read as llama.cpp's "gemma4" vocabulary: the
        # suite's .out ids, which Hugging Face's tokenizer of the real model gave (newline and space runs
        # whole, the chat markers as tokens), and the ids `tokenizers` gives for the written file.
        suite = os.path.join(SUITES, "ggml-vocab-gemma-4.gguf")
        if not os.path.exists(suite):
            self.skipTest(f"{suite} is absent")
        folder = os.path.join(server_harness.TMP.name, "gemma-4")
        subprocess.run([sys.executable, GENERATOR, "--family", "gemma4_text", "--out", folder, "--vocab-from", suite], check=True)
        with open(suite + ".inp", encoding="utf-8") as f:
            texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
        with open(suite + ".out", encoding="utf-8") as f:
            lines = f.read().split("\n")
        self.assertGreaterEqual(len(lines), len(texts))
        published = [[int(i) for i in line.split()] for line in lines[:len(texts)]]
        hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        server = LoomServer(server_harness.write_config("hf-gemma4-vocab.toml"), folder)
        try:
            for text, want in zip(texts, published):
                status, body = server.json("POST", "/tokenize", {"content": text, "add_special": False})
                self.assertEqual(status, 200, body)
                self.assertEqual(body["tokens"], want, repr(text))
                self.assertEqual(hf.encode(text, add_special_tokens=False).ids, want, repr(text))
        finally:
            server.terminate()

    def test_a_t5_vocabulary_gives_llama_cpps_ids(self):
        # The GGUF's unigram vocabulary ("t5") runs SentencePiece's own normalization, as llama.cpp does:
        # its ids for the suite's texts (tests/data, from scripts/reference/tokenize_reference.cpp).
        with open(os.path.join(HERE, "..", "data", "tokenize-nomic-bert-moe-llama-cpp.json"), encoding="utf-8") as f:
            reference = json.load(f)
        with open(os.path.join(SUITES, reference["texts_from"]), encoding="utf-8") as f:
            texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
        self.assertEqual(len(texts), len(reference["ids"]))
        for text, want in zip(texts, reference["ids"]):
            done = server_harness.run_loom("tokenize", "--model", os.path.join(SUITES, reference["vocab"]), "--no-bos", "--ids-only", "--", text)
            self.assertEqual(done.returncode, 0, done.stderr)
            got = [int(t) for t in done.stdout.replace(",", " ").replace("[", " ").replace("]", " ").split()]
            self.assertEqual(got, want, repr(text))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
