#!/usr/bin/env python3
"""Issue 39: LoRA adapters served as models, driven by the official `openai` client.

A synthetic llama and two synthetic adapters of it (`loom gguf synth-lora`), one from loom.toml's
[[lora]] and one from --lora NAME=PATH:SCALE. /v1/models lists the base model and each adapter with its
base as parent; a completion or chat naming an adapter as its model runs through it (its own greedy text,
the adapter's name in the response, streamed or not) and one naming the base model runs without it;
an unknown name is a 404 listing the served ones; adapters and the base model interleaved in one batch
each get what they get alone. With [server] enable_lora_loading, vLLM's /v1/load_lora_adapter and
/v1/unload_lora_adapter load and unload adapters while the server runs, behind the API key: unloading
waits for a streaming request through the adapter, a full set of slots or a bad file is a 400 naming
it, and without the setting both are a 404. A PEFT adapter (adapter_config.json and
adapter_model.safetensors) of a Hugging Face llama folder gives the log-probabilities, to the last bit, of the
same adapter as llama.cpp's converter writes it (q and k rows of lora_B interleaved) on the GGUF of the
same weights (skipped without numpy, safetensors or gguf). Skips (77) without the `openai` package.
usage: test_lora.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import concurrent.futures
import json
import os
import subprocess
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


class LoraServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tmp = server_harness.TMP.name
        cls.model = server_harness.synth(os.path.join(tmp, "base.gguf"), 512)
        cls.adapters = {}
        for name, rank, seed in (("support", 8, 1), ("sql", 16, 2)):
            path = os.path.join(tmp, name + ".gguf")
            done = server_harness.run_loom("gguf", "synth-lora", "--model", cls.model, "--rank", str(rank), "--seed", str(seed), "-o", path)
            assert done.returncode == 0, done.stderr
            cls.adapters[name] = path
        config = server_harness.write_config("lora.toml")
        with open(config, "a") as f:
            f.write(f'\n[[lora]]\nname = "support"\npath = "{cls.adapters["support"]}"\nscale = 1.0\n')
        cls.server = LoomServer(config, cls.model, ["--lora", f"sql={cls.adapters['sql']}:0.5"])
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)
        cls.base_name = cls.client.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def complete(self, model, prompt="hello world", **kw):
        return self.client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0, **kw)

    def test_models_lists_the_adapters_with_their_base(self):
        cards = {m.id: m for m in self.client.models.list().data}
        self.assertEqual(set(cards), {self.base_name, "support", "sql"})
        for name in ("support", "sql"):
            self.assertEqual(cards[name].model_extra["parent"], self.base_name)
            self.assertEqual(cards[name].model_extra["root"], self.adapters[name])
        self.assertEqual(cards["sql"].model_extra["loom"]["lora"], {"scale": 0.5, "rank": 16})
        self.assertEqual(self.client.models.retrieve("support").id, "support")

    def test_a_request_runs_through_the_adapter_it_names(self):
        texts = {}
        for model in (self.base_name, "support", "sql"):
            reply = self.complete(model)
            self.assertEqual(reply.model, model)
            texts[model] = reply.choices[0].text
        self.assertEqual(len(set(texts.values())), 3, texts)  # each adapter changes the text
        self.assertEqual(self.complete("support").choices[0].text, texts["support"])  # and deterministically
        stream = self.client.completions.create(model="sql", prompt="hello world", max_tokens=8, temperature=0, stream=True)
        chunks = list(stream)
        self.assertEqual("".join(c.choices[0].text for c in chunks if c.choices), texts["sql"])
        self.assertTrue(all(c.model == "sql" for c in chunks))
        chat = self.client.chat.completions.create(model="support", messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                                   temperature=0)
        self.assertEqual(chat.model, "support")

    def test_an_unknown_model_is_a_404_listing_the_served_ones(self):
        with self.assertRaises(openai.NotFoundError) as caught:
            self.complete("nope")
        message = str(caught.exception)
        for name in (self.base_name, "support", "sql"):
            self.assertIn(f"'{name}'", message)

    def test_adapters_and_the_base_interleaved_get_what_they_get_alone(self):
        prompts = [f"request {i}: the quick brown fox" for i in range(12)]
        models = [(self.base_name, "support", "sql")[i % 3] for i in range(12)]
        alone = [self.complete(m, p).choices[0].text for m, p in zip(models, prompts)]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            together = list(pool.map(lambda mp: self.complete(*mp).choices[0].text, zip(models, prompts)))
        self.assertEqual(together, alone)


class LoraLoadingTest(unittest.TestCase):
    def test_load_use_and_unload_while_serving(self):
        tmp = server_harness.TMP.name
        model = server_harness.synth(os.path.join(tmp, "base-loading.gguf"), 512)
        adapters = []
        for seed, rank in ((5, 8), (6, 16), (7, 32)):
            path = os.path.join(tmp, f"loadable-{seed}.gguf")
            done = server_harness.run_loom("gguf", "synth-lora", "--model", model, "--rank", str(rank), "--seed", str(seed), "-o", path)
            assert done.returncode == 0, done.stderr
            adapters.append(path)
        config = server_harness.write_config("lora-loading.toml", extra='enable_lora_loading = true\napi_key = "k"')
        with open(config, "a") as f:
            f.write("\n[model]\nmax_loras = 2\nmax_lora_rank = 16\n")
        server = LoomServer(config, model)
        key = {"Authorization": "Bearer k"}
        try:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="k", max_retries=0)
            status, _, _ = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": adapters[0]})
            self.assertEqual(status, 401)  # behind the API key
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": adapters[0]}, key)
            self.assertEqual(status, 200, body)
            self.assertIn(b"added successfully", body)
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "y", "lora_path": adapters[1]}, key)
            self.assertEqual(status, 200, body)
            self.assertEqual({m.id for m in client.models.list().data} - {"base-loading"}, {"x", "y"})
            base = client.completions.create(model="base-loading", prompt="hello", max_tokens=6, temperature=0).choices[0].text
            with_x = client.completions.create(model="x", prompt="hello", max_tokens=6, temperature=0).choices[0].text
            self.assertNotEqual(with_x, base)
            # Both slots are taken; a third adapter is refused naming the setting, a rank-32 one its rank.
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "z", "lora_path": adapters[1]}, key)
            self.assertEqual(status, 400)
            self.assertIn(b"max_loras", body)
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": adapters[1]}, key)
            self.assertEqual(status, 400)
            self.assertIn(b"loaded already", body)
            # Unloading waits for a streaming request through the adapter, which ends whole: its text is the
            # adapter's to the last token (an emptied slot would turn the rest into the base model's).
            whole = client.completions.create(model="x", prompt="hello", max_tokens=200, temperature=0,
                                              extra_body={"ignore_eos": True}).choices[0].text
            stream = client.completions.create(model="x", prompt="hello", max_tokens=200, temperature=0, stream=True,
                                               extra_body={"ignore_eos": True})
            first = next(iter(stream))
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                unloading = pool.submit(server.request, "POST", "/v1/unload_lora_adapter", {"lora_name": "x"}, key)
                rest = list(stream)
                self.assertEqual(unloading.result(timeout=60)[0], 200)
            self.assertEqual("".join(c.choices[0].text for c in [first, *rest] if c.choices), whole)
            self.assertEqual([c.choices[0].finish_reason for c in rest if c.choices and c.choices[0].finish_reason], ["length"])
            with self.assertRaises(openai.NotFoundError):
                client.completions.create(model="x", prompt="hello", max_tokens=2)
            status, _, body = server.request("POST", "/v1/unload_lora_adapter", {"lora_name": "x"}, key)
            self.assertEqual(status, 404)
            # Its slot is free again; the same file reloaded gives the same text.
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "x2", "lora_path": adapters[0]}, key)
            self.assertEqual(status, 200, body)
            self.assertEqual(client.completions.create(model="x2", prompt="hello", max_tokens=6, temperature=0).choices[0].text, with_x)
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "w", "lora_path": model}, key)
            self.assertEqual(status, 400)
            self.assertIn(b"not 'adapter'", body)
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "w"}, key)
            self.assertEqual(status, 400)
            self.assertIn(b"lora_path", body)
        finally:
            server.terminate()

    def test_runtime_loading_is_off_by_default(self):
        server = LoomServer(server_harness.write_config("lora-off.toml"), server_harness.synth(os.path.join(server_harness.TMP.name, "off.gguf"), 256))
        try:
            status, _, body = server.request("POST", "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/nonexistent"})
            self.assertEqual(status, 404)
            self.assertIn(b"enable_lora_loading", body)
        finally:
            server.terminate()


def write_peft_and_gguf_adapters(folder, peft_dir, gguf_path, rank=8, alpha=16.0, seed=3):
    """A PEFT adapter of the make_hf_checkpoint llama folder and the GGUF llama.cpp's converter makes of it."""
    import json as json_module
    import gguf
    import numpy as np
    from safetensors.numpy import save_file
    with open(os.path.join(folder, "config.json")) as f:
        config = json_module.load(f)
    dim, heads, kv_heads, layers = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"], config["num_hidden_layers"]
    head_dim, ff = config.get("head_dim", dim // heads), config["intermediate_size"]
    shapes = {"self_attn.q_proj": (dim, heads * head_dim), "self_attn.k_proj": (dim, kv_heads * head_dim),
              "self_attn.v_proj": (dim, kv_heads * head_dim), "self_attn.o_proj": (heads * head_dim, dim),
              "mlp.gate_proj": (dim, ff), "mlp.up_proj": (dim, ff), "mlp.down_proj": (ff, dim)}
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    rng = np.random.default_rng(seed)
    tensors = {}
    writer = gguf.GGUFWriter(gguf_path, "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    for il in range(layers):
        for module, (n_in, n_out) in shapes.items():
            a = (rng.standard_normal((rank, n_in)) / np.sqrt(n_in)).astype(np.float32)
            b = (rng.standard_normal((n_out, rank)) * 0.5 / np.sqrt(rank)).astype(np.float32)
            tensors[f"base_model.model.model.layers.{il}.{module}.lora_A.weight"] = a
            tensors[f"base_model.model.model.layers.{il}.{module}.lora_B.weight"] = b
            if module in ("self_attn.q_proj", "self_attn.k_proj"):  # LlamaModel.permute, as on the base weights
                h = heads if module == "self_attn.q_proj" else kv_heads
                b = b.reshape(h, 2, n_out // h // 2, rank).swapaxes(1, 2).reshape(n_out, rank)
            writer.add_tensor(f"blk.{il}.{names[module]}.weight.lora_a", a)
            writer.add_tensor(f"blk.{il}.{names[module]}.weight.lora_b", np.ascontiguousarray(b))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.makedirs(peft_dir, exist_ok=True)
    save_file(tensors, os.path.join(peft_dir, "adapter_model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(peft_dir, "adapter_config.json"), "w") as f:
        json_module.dump({"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": [m.split(".")[1] for m in shapes],
                          "base_model_name_or_path": "synthetic-llama", "use_rslora": False, "use_dora": False,
                          "fan_in_fan_out": False, "bias": "none", "task_type": "CAUSAL_LM"}, f)


class PeftAdapterTest(unittest.TestCase):
    def test_a_peft_adapter_is_llama_cpps_converted_adapter(self):
        try:
            import gguf  # noqa: F401
            import numpy  # noqa: F401
            import safetensors  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as e:
            self.skipTest(f"{e.name} is not installed")
        tmp = server_harness.TMP.name
        folder, reference = os.path.join(tmp, "hf-llama"), os.path.join(tmp, "hf-llama.gguf")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "scripts", "make_hf_checkpoint.py"), "--family", "llama",
                        "--out", folder, "--gguf", reference, "--dtype", "F32"], check=True)
        peft_dir, gguf_adapter = os.path.join(tmp, "peft-adapter"), os.path.join(tmp, "converted-adapter.gguf")
        write_peft_and_gguf_adapters(folder, peft_dir, gguf_adapter)
        config = server_harness.write_config("peft.toml")
        results = []
        for model, adapter in ((folder, peft_dir), (reference, gguf_adapter)):
            server = LoomServer(config, model, ["--lora", f"tuned={adapter}"])
            try:
                out = []
                for name in ("tuned", None):
                    body = {"prompt": [5, 17, 99, 240, 3, 77, 41, 42], "max_tokens": 6, "temperature": 0, "logprobs": 5, "ignore_eos": True}
                    if name:
                        body["model"] = name
                    status, reply = server.json("POST", "/v1/completions", body)
                    self.assertEqual(status, 200, reply)
                    out.append(reply["choices"][0]["logprobs"]["top_logprobs"])
                results.append(out)
            finally:
                server.terminate()
        self.assertEqual(results[0][0], results[1][0])  # the adapter, read from PEFT's files or llama.cpp's
        self.assertEqual(results[0][1], results[1][1])  # the base model alone
        self.assertNotEqual(results[0][0], results[0][1])
        # PEFT's variants Loom does not apply are refused by name.
        bad = os.path.join(tmp, "peft-dora")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(peft_dir, "adapter_config.json")) as f:
            config_json = json.load(f)
        config_json["use_dora"] = True
        with open(os.path.join(bad, "adapter_config.json"), "w") as f:
            json.dump(config_json, f)
        os.symlink(os.path.join(peft_dir, "adapter_model.safetensors"), os.path.join(bad, "adapter_model.safetensors"))
        done = server_harness.run_loom("generate", "--model", folder, "--lora", f"dora={bad}", "--adapter", "dora", "-n", "2", "hi")
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("use_dora", done.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
