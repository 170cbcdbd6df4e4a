#!/usr/bin/env python3
"""Issue 38: quantized Hugging Face checkpoints (GPTQ, AWQ, compressed-tensors, FP8) read as published.

scripts/make_hf_checkpoint.py writes a synthetic float checkpoint; scripts/quantize_hf_checkpoint.py
packs its linear layers as each method's own packer does (GPTQ's v1 zeros, AWQ's interleaved order,
compressed-tensors' offset codes, with F16 or BF16 scales, in groups or per channel) and writes the
dequantized weights (q - zero) * scale. Loom repacks the layers into llama.cpp blocks (Q4_0, Q5_0,
Q8_0), or F16 rows where no block holds them (GPTQ's act-order, groups over permuted columns); `loom convert` writes them out, and gguf-py's own dequantizer must give those weights to the
bit, Llama's q/k rows in llama.cpp's order. The folder serves the same tokens and log-probabilities as
its converted GGUF, close to those of the unquantized checkpoint holding the dequantized weights, and
the variants no block type holds are refused naming what is wrong. gpt-oss's MXFP4 experts, as OpenAI
published them, become ggml MXFP4 blocks holding the same values (gguf-py's dequantizer against
transformers' reading of the published codes). FP8 layers (quant_method fp8's blocks, compressed-tensors
float-quantized per tensor, per channel and in blocks) load as Loom's F8_E4M3_B32 blocks; converted to
F32, they are code value * scale in float32 to the bit.
Skips (77) without numpy, safetensors, tokenizers or gguf.
usage: test_hf_quantized.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import json
import os
import shutil
import subprocess
import sys
import unittest


try:
    import gguf
    import numpy as np
    import safetensors  # noqa: F401
    import tokenizers  # noqa: F401
    from gguf import quants
except ImportError as e:
    print(f"skipped: {e.name} is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts")
sys.path.insert(0, HERE)
sys.path.insert(0, SCRIPTS)
import server_harness  # noqa: E402
from make_hf_checkpoint import interleave_rope_halves  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()

# name -> (family, method, group size, the block type Loom must choose)
CASES = {
    "gptq": ("qwen2", "gptq", 64, "Q4_0"),
    "gptq-llama": ("llama", "gptq", 64, "Q4_0"),  # q/k rows interleaved after the repack
    "gptq-asym": ("qwen2", "gptq-asym", 128, "Q5_0"),
    "gptq8": ("qwen2", "gptq8", -1, "Q8_0"),
    "awq": ("qwen2", "awq", 64, "Q5_0"),
    "awq-llama": ("llama", "awq", 128, "Q5_0"),
    "ct-w4": ("qwen2", "ct-w4", 32, "Q4_0"),
    "ct-w8": ("qwen2", "ct-w8", -1, "Q8_0"),
    # MoE: each expert repacked, then stacked (qwen2_moe's shared expert too).
    "gptq-moe": ("qwen2_moe", "gptq", 32, "Q4_0"),
    "awq-moe": ("qwen3_moe", "awq", 64, "Q5_0"),
    # act-order: the columns of a block share no scale; F16 rows hold (q - zero) * scale, rounded once.
    "gptq-act-order": ("qwen2", "gptq", 64, "F16"),
    "gptq8-asym": ("qwen2", "gptq8-asym", 128, "F16"),  # 8-bit with zero points: no block type either
}
EXTRA_OPTIONS = {"gptq-act-order": ["--act-order"]}
# FP8: name -> (family, method, the rows and columns a block scale covers). Loom holds them as
# F8_E4M3_B32 blocks, which only Loom reads: `loom convert --type F32` writes their decoded values.
FP8_CASES = {
    "fp8": ("qwen2", "fp8", "96,64"),  # 128 rows in blocks of 96: a partial block of scales
    "ct-fp8": ("qwen2", "ct-fp8", "128,128"),  # per channel, BF16 scales
    "ct-fp8-tensor": ("llama", "ct-fp8-tensor", "128,128"),  # q/k rows interleaved after the repack
    "ct-fp8-block": ("qwen3_moe", "ct-fp8-block", "32,64"),  # experts stacked
}
GGUF_NAMES = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
              "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}


def gguf_place(stem):
    """The GGUF tensor a checkpoint layer lands in, and its expert's index in the stack (None: its own)."""
    parts = stem.split(".")
    layer, proj = parts[2], parts[-1]
    if ".experts." in stem:
        return f"blk.{layer}.{GGUF_NAMES[proj]}_exps.weight", int(parts[-2])
    if ".shared_expert." in stem:
        return f"blk.{layer}.{GGUF_NAMES[proj]}_shexp.weight", None
    return f"blk.{layer}.{GGUF_NAMES[proj]}.weight", None
HEADS = {"q_proj": 4, "k_proj": 2}  # make_hf_checkpoint's shape: 4 heads, 2 KV heads


def float_folder(family):
    folder = os.path.join(server_harness.TMP.name, family)
    if not os.path.exists(folder):
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "make_hf_checkpoint.py"), "--family", family, "--out", folder], check=True)
    return folder


def quantized(case, *extra):
    if case in FP8_CASES:
        family, method, block = FP8_CASES[case]
        options = ["--fp8-block", block]
    else:
        family, method, group, _ = CASES[case]
        options = ["--group-size", str(group), *EXTRA_OPTIONS.get(case, [])]
    folder = os.path.join(server_harness.TMP.name, case + "".join(extra))
    if not os.path.exists(folder):
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "quantize_hf_checkpoint.py"), "--in", float_folder(family), "--out", folder,
                        "--method", method, *options, "--expected", folder + ".npz", "--dequantized", folder + "-dequantized", *extra],
                       check=True)
    return folder


def tensor_types(model):
    """`loom gguf info --all`'s tensor table: name -> type."""
    done = server_harness.run_loom("gguf", "info", model, "--all")
    if done.returncode != 0:
        raise AssertionError(done.stderr)
    rows = [line.split() for line in done.stdout.splitlines()]
    return {row[1]: row[2] for row in rows if len(row) >= 6 and row[0].isdigit()}


def converted(folder, *extra):
    out = folder + "".join(extra).replace("-", "") + ".gguf"
    done = server_harness.run_loom("convert", folder, out, "--force", *extra)
    if done.returncode != 0:
        raise AssertionError(done.stderr)
    return out


def first_token_logprobs(server, prompt):
    status, body = server.json("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0, "logprobs": 5})
    if status != 200:
        raise AssertionError(body)
    return body["choices"][0]["logprobs"]["top_logprobs"][0]


def greedy(server):
    status, body = server.json("POST", "/v1/completions", {
        "prompt": [5, 17, 99, 240, 3, 77], "max_tokens": 8, "temperature": 0, "logprobs": 3, "ignore_eos": True})
    if status != 200:
        raise AssertionError(body)
    lp = body["choices"][0]["logprobs"]
    return lp["tokens"], lp["top_logprobs"]


class QuantizedFolderTest(unittest.TestCase):
    def test_layers_repack_to_blocks_holding_the_dequantized_weights_exactly(self):
        cases = {case: (family, block, ()) for case, (family, _, _, block) in CASES.items()}
        cases.update({case: (family, "F32", ("--type", "F32")) for case, (family, _, _) in FP8_CASES.items()})
        for case, (family, block, convert_options) in cases.items():
            folder = quantized(case)
            tensors = {t.name: t for t in gguf.GGUFReader(converted(folder, *convert_options)).tensors}
            if case in FP8_CASES:  # held as FP8 blocks in memory; decoded to F32 by the conversion
                held = tensor_types(folder)
                self.assertEqual(sum(t == "F8_E4M3_B32" for t in held.values()), 14, case)
            expected = np.load(folder + ".npz")
            self.assertGreaterEqual(len(expected.files), 14, case)  # 7 linear layers x 2, and the experts
            for stem in expected.files:
                proj = stem.split(".")[-1]
                name, expert = gguf_place(stem)
                t = tensors[name]
                self.assertEqual(t.tensor_type.name, block, f"{case} {stem}")
                want = expected[stem].astype(np.float32)
                if block == "F16":  # the method's own F16 dequantization: one rounding of the exact value
                    want = want.astype(np.float16).astype(np.float32)
                if family == "llama" and proj in HEADS:
                    want = interleave_rope_halves(want, HEADS[proj])
                got = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
                got = (got.reshape(-1, *want.shape)[expert] if expert is not None else got).reshape(want.shape)
                self.assertTrue(np.array_equal(got.view(np.uint32), want.view(np.uint32)),
                                f"{case} {stem}: largest difference {np.abs(got - want).max()}")

    def test_the_folder_serves_what_its_conversion_serves(self):
        config = server_harness.write_config("hf-quantized.toml")
        for case in ("gptq-llama", "awq", "ct-w8", "awq-moe"):
            folder = quantized(case)
            results = []
            for model in (folder, converted(folder)):
                server = LoomServer(config, model)
                try:
                    results.append(greedy(server))
                finally:
                    server.terminate()
            self.assertEqual(len(results[0][0]), 8, case)
            self.assertEqual(results[0], results[1], case)

    def test_logits_match_the_dequantized_reference(self):
        # The reference: the same checkpoint unquantized, its layers the dequantized F32 weights. The
        # repacked layers' kernels round activations to int8 blocks, the F32 ones do not: measured
        # (2026-12-07) at most 0.032 apart in the top-5 log-probabilities, the same argmax. FP8 blocks
        # meet float activations: only summation order differs (measured at most 2e-5 apart).
        config = server_harness.write_config("hf-quantized-reference.toml")
        prompts = [[5, 17, 99, 240, 3, 77], list(range(40, 90)), [300, 301, 302, 7, 8, 9, 10]]
        for case in ("gptq", "awq", "ct-w4", "gptq8", "gptq-moe", "gptq-act-order", "fp8", "ct-fp8", "ct-fp8-block"):
            folder = quantized(case)
            tops = {}
            for model in (folder, folder + "-dequantized"):
                server = LoomServer(config, model)
                try:
                    tops[model] = [first_token_logprobs(server, p) for p in prompts]
                finally:
                    server.terminate()
            for got, want in zip(tops[folder], tops[folder + "-dequantized"]):
                self.assertEqual(max(got, key=got.get), max(want, key=want.get), case)
                for token in set(got) & set(want):
                    self.assertLess(abs(got[token] - want[token]), 1e-3 if case in FP8_CASES else 0.1, f"{case}: {token!r}")

    def test_fp8_folders_decode_alike_on_vulkan_and_the_cpu(self):
        # Vulkan decodes F8_E4M3_B32 in its own shaders (dequant_more.glsl): the same tokens, and
        # log-probabilities as close as float summation order allows (measured 4.9e-5 on lavapipe).
        if not os.path.exists(os.path.join(ARGS.plugins, "libloom_vulkan.so")):
            self.skipTest("the Vulkan plugin is not built")
        results = {}
        for backend in ("cpu", "vulkan"):
            config = os.path.join(server_harness.TMP.name, f"fp8-{backend}.toml")
            with open(config, "w") as f:
                f.write(f'[backend]\nname = "{backend}"\nthreads = 2\n\n[kv]\nmemory = "4MiB"\nblock_size = 16\n')
            try:
                server = LoomServer(config, quantized("ct-fp8-block"))
            except RuntimeError as e:
                if backend == "vulkan" and "no Vulkan" in str(e):
                    self.skipTest("no Vulkan device (mesa-vulkan-drivers gives lavapipe)")
                raise
            try:
                results[backend] = greedy(server)
            finally:
                server.terminate()
        self.assertEqual(results["cpu"][0], results["vulkan"][0])
        for got, want in zip(results["vulkan"][1], results["cpu"][1]):
            for token in set(got) & set(want):
                self.assertLess(abs(got[token] - want[token]), 1e-3, token)

    def test_gpt_oss_mxfp4_experts_become_ggml_blocks_of_the_same_values(self):
        # OpenAI's layout read as transformers reads it (two E2M1 codes a byte, the even element low,
        # times 2^(exponent - 127)) against gguf-py's own MXFP4 dequantizer on `loom convert`'s file.
        if not hasattr(gguf.GGMLQuantizationType, "MXFP4"):
            self.skipTest("gguf-py without MXFP4 (0.18 or later; scripts/setup.sh installs it)")
        from safetensors.numpy import load_file
        folder = float_folder("gpt_oss")
        tensors = {t.name: t for t in gguf.GGUFReader(converted(folder)).tensors}
        published = load_file(os.path.join(folder, "model.safetensors"))
        fp4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float32)

        def dequantized(name):
            blocks, scales = published[name + "_blocks"], published[name + "_scales"]
            v = np.stack([fp4[blocks & 0x0F], fp4[blocks >> 4]], axis=-1).reshape(*blocks.shape[:-1], 32)
            v = v * np.exp2(scales.astype(np.int32) - 127)[..., None]
            return v.reshape(*v.shape[:-2], -1).astype(np.float32)

        checked = 0
        for layer in range(2):
            p = f"model.layers.{layer}.mlp.experts."
            gate_up, down = dequantized(p + "gate_up_proj"), dequantized(p + "down_proj")
            for name, want in (("ffn_gate_exps", gate_up[:, ::2]), ("ffn_up_exps", gate_up[:, 1::2]), ("ffn_down_exps", down)):
                t = tensors[f"blk.{layer}.{name}.weight"]
                self.assertEqual(t.tensor_type.name, "MXFP4", name)
                got = quants.dequantize(t.data, t.tensor_type).reshape(want.shape)
                self.assertTrue(np.array_equal(got, want), f"layer {layer} {name}")
                checked += 1
            bias = published[p + "gate_up_proj_bias"].astype(np.float32)
            gate_bias = tensors[f"blk.{layer}.ffn_gate_exps.bias"]
            self.assertEqual(gate_bias.tensor_type.name, "F32")  # as the converter writes biases
            self.assertTrue(np.array_equal(np.asarray(gate_bias.data).reshape(bias[:, ::2].shape), bias[:, ::2]))
        self.assertEqual(checked, 6)

    def refused(self, folder, edit=None):
        if edit:
            with open(os.path.join(folder, "config.json")) as f:
                config = json.load(f)
            edit(config["quantization_config"])
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump(config, f)
        done = server_harness.run_loom("gguf", "info", folder)
        self.assertNotEqual(done.returncode, 0, folder)
        return done.stderr

    def test_unsupported_variants_are_refused_naming_the_reason(self):
        def copy_of(case, name):
            folder = os.path.join(server_harness.TMP.name, name)
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(quantized(case), folder)
            return folder

        err = self.refused(copy_of("gptq", "bnb"), lambda q: q.update(quant_method="bitsandbytes"))
        self.assertIn("quantization method 'bitsandbytes'", err)
        self.assertIn("config.json", err)
        # FP8: scale blocks that split Loom's blocks of 32 columns, and scales that do not fit the weight.
        err = self.refused(copy_of("fp8", "fp8-48"), lambda q: q.update(weight_block_size=[128, 48]))
        self.assertIn("FP8 scale blocks of 48 columns", err)
        err = self.refused(copy_of("fp8", "fp8-128"), lambda q: q.update(weight_block_size=[128, 128]))
        self.assertIn(".weight_scale_inv' should hold 1 x 1 scales", err)
        err = self.refused(copy_of("ct-fp8", "ct-fp8-e5m2"), lambda q: q["config_groups"]["group_0"]["weights"].update(num_bits=4))
        self.assertIn("other than 8-bit floats", err)
        err = self.refused(copy_of("gptq", "group48"), lambda q: q.update(group_size=48))
        self.assertIn("group_size 48", err)
        err = self.refused(copy_of("awq", "gemv"), lambda q: q.update(version="gemv"))
        self.assertIn("AWQ version 'gemv'", err)
        # act-order's g_idx must name groups the scales have.
        err = self.refused(copy_of("gptq-act-order", "act-order-groups"), lambda q: q.update(group_size=128))
        self.assertIn(".scales' should be F16", err)
        # GPTQ scales must match the packed shape the config's group size implies.
        err = self.refused(copy_of("gptq", "group128"), lambda q: q.update(group_size=128))
        self.assertIn(".scales' should be F16", err)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
