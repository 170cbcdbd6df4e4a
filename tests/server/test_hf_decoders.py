#!/usr/bin/env python3
"""Issue 38: generative models read from Hugging Face folders as published, one family table each.

scripts/make_hf_checkpoint.py writes, for llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, gemma2,
gemma3_text, gemma4_text, phi3, olmo2, smollm3, granite, gpt_oss, qwen3_5_text, qwen3_5_moe_text and qwen3_next, a
synthetic checkpoint folder (safetensors, config.json, a
byte-level or SentencePiece-style BPE tokenizer.json made with `tokenizers`, tokenizer_config.json with
a chat template) and, with gguf-py, the GGUF llama.cpp's converter makes of the same weights (its
names and keys, Llama's q/k rows interleaved, experts stacked, Gemma's and Qwen 3.5's norms as 1 + w,
Qwen 3.5's value heads tiled, the rope
tensors computed from Llama 3.1's and Phi-3's rope scaling). Loom must read the two as one
model: the same ids as the `tokenizers` package for every text, the same pre-tokenizer name the
converter would write, and logits equal to the last bit (the top log-probabilities of every greedy
step through /v1/completions). `loom convert` of the folder serves the same logits again. Skips (77)
without numpy, safetensors, tokenizers or gguf.
usage: test_hf_decoders.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import json
import os
import subprocess
import sys
import unittest


try:
    import gguf  # noqa: F401 (the generator's GGUF writer)
    import numpy  # noqa: F401
    import safetensors  # noqa: F401
    from tokenizers import Tokenizer
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()
GENERATOR = os.path.join(HERE, "..", "..", "scripts", "make_hf_checkpoint.py")

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure THEY'LL say it's fine; you've SEEN it.",
    "def add(a, b):\n    return a + b  # 12345 67\n\n\n",
    "Café déjà vu: naïve résumés, 42 times. Grüße! Привет, мир. 你好，世界。",
    "   leading spaces, trailing spaces   \t\r\n tabs and emoji 😀🚀",
    "<|im_start|>user\nhello<|im_end|>",
]

# family -> (generator options, llama.cpp's pre-tokenizer name the converter writes for it)
CASES = {
    "llama": (["--tied"], "llama-bpe"),
    # SentencePiece-style: llama.cpp's "llama" model with or without the space prefix, no pre-tokenizer.
    "mistral": (["--dtype", "BF16"], "spm"),
    "gemma2": ([], "spm-no-prefix"),
    "gemma3_text": (["--dtype", "BF16"], "spm-no-prefix"),
    "phi3": ([], "spm"),  # with LongRoPE
    "qwen2": (["--shards", "3"], "qwen2"),
    "qwen3": ([], "qwen2"),
    "qwen2_moe": ([], "qwen2"),
    "qwen3_moe": (["--dtype", "BF16", "--fused-experts"], "qwen2"),  # experts stacked, as transformers 5 saves them
    "olmo2": ([], "gpt-2"),
    "smollm3": (["--dtype", "F32"], "llama-bpe"),
    "granite": ([], "starcoder"),
    "gpt_oss": ([], "qwen2"),  # MXFP4 experts as published, gate/up rows interleaved; sinks; yarn; window 8
    "gpt_oss-bf16": (["--unquantized-experts", "--dtype", "BF16"], "qwen2"),  # a dequantized release: experts transposed
    # Gemma 3's vision releases (Gemma3ForConditionalGeneration): the text model under text_config, its
    # tensors renamed, as transformers saved them before 4.52 and after.
    "gemma3_text-wrapped": (["--wrapped", "old"], "spm-no-prefix"),
    "gemma3_text-wrapped2": (["--wrapped", "new", "--dtype", "BF16"], "spm-no-prefix"),
    # Qwen 3.5: Gated DeltaNet layers (value heads grouped by key head, tiled as the converter tiles them;
    # A_log as -exp; conv1d squeezed) between gated attention layers; zero-centred norms as 1 + w.
    "qwen3_5_text": ([], "qwen35"),
    "qwen3_5_text-wrapped": (["--wrapped", "new", "--dtype", "BF16"], "qwen35"),  # Qwen3_5ForConditionalGeneration
    "qwen3_5_moe_text": (["--fused-experts"], "qwen35"),  # experts stacked, as transformers 5 saves them; a shared expert
    # Qwen3-Next: in_proj_qkvz and in_proj_ba fused per key head, split as the converter splits them; value
    # heads left grouped (llama.cpp's qwen3next reads them so).
    "qwen3_next": ([], "qwen35"),
    # Gemma 4: sliding and full layers of different head sizes, proportional rope (rope_freqs), shared KV
    # with doubled FFNs, per-layer embeddings, layer scalars; norms as w. Its tokenizer as llama.cpp's
    # "gemma4" model (pieces and merges, split at newline runs). Also inside Gemma4ForConditionalGeneration.
    "gemma4_text": (["--dtype", "BF16"], "gemma4"),
    "gemma4_text-wrapped": (["--wrapped", "new"], "gemma4"),
}


def generate(family):
    folder = os.path.join(server_harness.TMP.name, family)
    reference = folder + "-reference.gguf"
    if not os.path.exists(reference):
        subprocess.run([sys.executable, GENERATOR, "--family", family.split("-")[0], "--out", folder, "--gguf", reference,
                        *CASES[family][0]], check=True)
    return folder, reference


def loom_ids(model, text):
    done = server_harness.run_loom("tokenize", "--model", model, "--no-bos", "--ids-only", "--", text)
    if done.returncode != 0:
        raise AssertionError(done.stderr)
    return [int(t) for t in done.stdout.replace(",", " ").replace("[", " ").replace("]", " ").split()]


def greedy_logprobs(server, prompt_ids):
    status, body = server.json("POST", "/v1/completions", {
        "prompt": prompt_ids, "max_tokens": 8, "temperature": 0, "logprobs": 5, "ignore_eos": True})
    if status != 200:
        raise AssertionError(body)
    choice = body["choices"][0]
    return choice["text"], choice["logprobs"]["tokens"], choice["logprobs"]["top_logprobs"], choice["logprobs"]["token_logprobs"]


class DecoderFolderTest(unittest.TestCase):
    def test_tokenizer_json_gives_the_tokenizers_ids(self):
        for family in CASES:
            folder, reference = generate(family)
            hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            for text in TEXTS:
                want = hf.encode(text, add_special_tokens=False).ids
                self.assertEqual(loom_ids(folder, text), want, f"{family}: {text!r}")
                self.assertEqual(loom_ids(reference, text), want, f"{family} GGUF: {text!r}")

    def test_the_pre_tokenizer_is_named_as_llama_cpps_converter_names_it(self):
        for family, (_, pre) in CASES.items():
            folder, _ = generate(family)
            info = server_harness.run_loom("gguf", "info", folder)
            self.assertEqual(info.returncode, 0, info.stderr)
            if pre == "gemma4":
                self.assertRegex(info.stdout, r"tokenizer\.ggml\.model\s.*\bgemma4\b", family)
                self.assertRegex(info.stdout, r"tokenizer\.ggml\.merges\s", family)
            elif pre.startswith("spm"):
                self.assertRegex(info.stdout, r"tokenizer\.ggml\.model\s.*\bllama\b", family)
                prefix = "false" if pre == "spm-no-prefix" else "true"
                self.assertRegex(info.stdout, rf"tokenizer\.ggml\.add_space_prefix\s.*\b{prefix}\b", family)
            else:
                self.assertRegex(info.stdout, rf"tokenizer\.ggml\.pre\s.*\b{pre}\b", family)

    def test_folder_and_gguf_give_the_same_logits(self):
        config = server_harness.write_config("hf-decoders.toml")
        prompts = [[5, 17, 99, 240, 3, 77], list(range(40, 90))]
        for family in CASES:
            folder, reference = generate(family)
            got, want = {}, {}
            for model, out in ((folder, got), (reference, want)):
                server = LoomServer(config, model)
                try:
                    for i, prompt in enumerate(prompts):
                        out[i] = greedy_logprobs(server, prompt)
                    if model == folder:
                        # The template of tokenizer_config.json, when the family publishes one.
                        status, body = server.json("POST", "/v1/chat/completions", {
                            "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
                        self.assertEqual(status, 200, body)
                finally:
                    server.terminate()
            for i in got:
                self.assertEqual(got[i], want[i], f"{family}: prompt {i}")
            # Not every step may be a tie-free argmax, but the logits differ somewhere between prompts.
            self.assertNotEqual(got[0][2], got[1][2])

    def test_convert_writes_a_gguf_with_the_same_logits(self):
        folder, reference = generate("llama")
        out = os.path.join(server_harness.TMP.name, "llama-converted.gguf")
        done = server_harness.run_loom("convert", folder, out, "--force")
        self.assertEqual(done.returncode, 0, done.stderr)
        config = server_harness.write_config("hf-convert.toml")
        results = []
        for model in (out, reference):
            server = LoomServer(config, model)
            try:
                results.append(greedy_logprobs(server, [1, 2, 3, 300, 301, 302]))
            finally:
                server.terminate()
        self.assertEqual(results[0], results[1])

    def test_generation_config_gives_the_default_sampling(self):
        # generation_config.json (temperature 0.7, top_p 0.8) becomes general.sampling.*, as llama.cpp's
        # converter writes it, and the defaults of a request without sampling parameters, unless
        # loom.toml sets the key.
        folder, _ = generate("qwen2")
        info = server_harness.run_loom("gguf", "info", folder)
        self.assertRegex(info.stdout, r"general\.sampling\.temp\s+float32\s+0\.(7|69999)")
        self.assertRegex(info.stdout, r"general\.sampling\.top_p\s+float32\s+0\.(8|79999)")
        for name, toml, want_temperature in (("sampling-model.toml", "", 0.7), ("sampling-toml.toml", "temperature = 0.3\n", 0.3)):
            config = server_harness.write_config(name)
            with open(config, "a") as f:
                f.write("\n[sampler]\n" + toml)
            server = LoomServer(config, folder)
            try:
                status, body = server.json("GET", "/props")
            finally:
                server.terminate()
            self.assertEqual(status, 200, body)
            params = body["default_generation_settings"]["params"]
            self.assertAlmostEqual(params["temperature"], want_temperature, places=5, msg=name)
            self.assertAlmostEqual(params["top_p"], 0.8, places=5, msg=name)
            self.assertEqual(params["top_k"], 40, name)  # Loom's own default: the file recommends none

    def test_unsupported_variants_are_refused_naming_the_key(self):
        cases = [("qwen2", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "rope scaling 'llama3'"),
                 ("gemma4_text", {"enable_moe_block": True}, "enable_moe_block"),
                 # Layer 5 alone shared: transformers reads the last full layer's KV (2), llama.cpp's gemma4 layer 4's.
                 ("gemma4_text", {"num_kv_shared_layers": 1}, "layer 5 shares the KV of layer 2")]
        for i, (family, change, message) in enumerate(cases):
            folder, _ = generate(family)
            bad = os.path.join(server_harness.TMP.name, f"{family}-bad{i}")
            os.makedirs(bad, exist_ok=True)
            for name in os.listdir(folder):
                target = os.path.join(bad, name)
                if not os.path.exists(target) and name != "config.json":
                    os.symlink(os.path.join(folder, name), target)
            with open(os.path.join(folder, "config.json")) as f:
                config = json.load(f)
            config.update(change)
            with open(os.path.join(bad, "config.json"), "w") as f:
                json.dump(config, f)
            done = server_harness.run_loom("gguf", "info", bad)
            self.assertNotEqual(done.returncode, 0, family)
            self.assertIn(message, done.stderr)
            self.assertIn("config.json", done.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
