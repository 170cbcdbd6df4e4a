#!/usr/bin/env python3
"""Quantizes a Hugging Face checkpoint folder's linear layers the way GPU serving stacks publish them,
with numpy only (round to nearest; the packing is what matters): GPTQ, AWQ or compressed-tensors.

Each method's layout, as its own packers write it:
- gptq (AutoGPTQ / GPTQModel, checkpoint_format "gptq"): qweight int32 [in * bits / 32, out], input
  rows packed low bits first; qzeros int32 [groups, out * bits / 32], each zero stored minus one
  (the v1 format), packed the same way along the outputs; scales F16 [groups, out]; g_idx [in].
- awq (AutoAWQ's GEMM version): qweight int32 [in, out / 8] and qzeros int32 [groups, out / 8], the
  8 outputs of a word in the order 0, 2, 4, 6, 1, 3, 5, 7 (order_map); scales F16 [groups, out].
- compressed-tensors pack-quantized: weight_packed int32 [out, in * bits / 32], signed values stored
  plus 2^(bits - 1), input columns low bits first; weight_scale [out, groups]; weight_shape [2].
  int-quantized: weight int8 [out, in], weight_scale [out, 1].
- fp8 (transformers' FineGrainedFP8, DeepSeek's and Qwen's FP8 releases): weight F8_E4M3 [out, in] and
  weight_scale_inv F32 [ceil(out / R), ceil(in / C)], one scale per R x C block (--fp8-block R,C).
- compressed-tensors float-quantized: weight F8_E4M3 [out, in] and weight_scale: [out, 1] BF16 per
  channel (ct-fp8), [1] F32 per tensor (ct-fp8-tensor) or blocks as fp8's, F32 (ct-fp8-block).
  FP8 codes are E4M3 ("fn": no infinities), rounded to nearest even from w / scale, the scale the
  block's largest magnitude over 448.

--expected writes, per layer (the checkpoint name without ".weight"), the dequantized weight
(q - zero) * scale in float32 (FP8: code value * scale), [out, in]: what a loader must reproduce exactly. --dequantized writes
the unquantized checkpoint with those weights (F32): the reference the quantized one's logits are
measured against.

usage: quantize_hf_checkpoint.py --in FOLDER --out FOLDER
                                 --method gptq|gptq-asym|gptq8|gptq8-asym|awq|ct-w4|ct-w8|fp8|ct-fp8|ct-fp8-tensor|ct-fp8-block
                                 [--group-size N] [--fp8-block R,C] [--expected FILE.npz] [--dequantized FOLDER] [--act-order]
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import load_file

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]

METHODS = {  # bits, symmetric
    "gptq": (4, True), "gptq-asym": (4, False), "gptq8": (8, True), "gptq8-asym": (8, False), "awq": (4, False), "ct-w4": (4, True), "ct-w8": (8, True),
    "fp8": (8, True), "ct-fp8": (8, True), "ct-fp8-tensor": (8, True), "ct-fp8-block": (8, True),
}


def e4m3_values():
    """The value of each E4M3 code 0..255 (0x7F and 0xFF: NaN)."""
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 15, codes & 7
    magnitude = np.where(exponent == 0, mantissa * 2.0 ** -9, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    magnitude[[0x7F, 0xFF]] = np.nan
    return np.where(codes & 0x80, -magnitude, magnitude).astype(np.float32)


def to_e4m3(x):
    """Codes of x rounded to the nearest E4M3 value, ties to the even code, saturating at 448."""
    levels = e4m3_values()[:0x7F]  # the finite non-negative values, increasing with the code
    a = np.minimum(np.abs(x).astype(np.float64), 448.0)
    upper = np.clip(np.searchsorted(levels, a), 1, 0x7E)
    lower = upper - 1
    below, above = a - levels[lower], levels[upper] - a
    code = np.where((above < below) | ((above == below) & (upper % 2 == 0)), upper, lower)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def fp8_quantize(w, block_rows, block_columns, scale_dtype):
    """E4M3 codes [out, in] and scales [ceil(out / block_rows), ceil(in / block_columns)] (block_rows
    or block_columns 0: the whole dimension), and the dequantized weight in float32."""
    out_f, in_f = w.shape
    br, bc = block_rows or out_f, block_columns or in_f
    rows, cols = -(-out_f // br), -(-in_f // bc)
    scale = np.zeros((rows, cols), dtype=np.float32)
    for i in range(rows):
        for j in range(cols):
            scale[i, j] = max(np.abs(w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]).max() / 448.0, 1e-6)
    if scale_dtype == "BF16":
        scale = (bf16_bits(scale).astype(np.uint32) << 16).view(np.float32)
    full = np.repeat(np.repeat(scale, br, axis=0), bc, axis=1)[:out_f, :in_f]
    codes = to_e4m3(w.astype(np.float32) / full)
    return codes, scale, e4m3_values()[codes] * full


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def bf16_bits(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def quantize(w, bits, symmetric, group, scale_dtype, column_group=None):
    """Round-to-nearest codes q (unsigned, [out, in]), zeros and scales ([out, groups]), scales
    representable in scale_dtype ("F16" or "BF16"). column_group (GPTQ's g_idx) puts column i in group
    column_group[i]; by default the groups are runs of `group` columns."""
    out_f, in_f = w.shape
    g = in_f if group < 0 else group
    groups = in_f // g
    order = np.argsort(column_group, kind="stable") if column_group is not None else np.arange(in_f)
    w = w[:, order]  # each group's columns side by side
    wg = w.reshape(out_f, groups, g).astype(np.float32)
    top = (1 << bits) - 1
    if symmetric:
        half = 1 << (bits - 1)
        scale = np.abs(wg).max(axis=2) / (half - 1)
        zero = np.full((out_f, groups), half, dtype=np.int32)
    else:
        lo, hi = np.minimum(wg.min(axis=2), 0.0), np.maximum(wg.max(axis=2), 0.0)
        scale = (hi - lo) / top
    scale = np.maximum(scale, 1e-3)
    scale = f16(scale).astype(np.float32) if scale_dtype == "F16" else (bf16_bits(scale).astype(np.uint32) << 16).view(np.float32)
    if not symmetric:
        zero = np.clip(np.round(-lo / scale), 0, top).astype(np.int32)
    q = np.clip(np.round(wg / scale[:, :, None]) + zero[:, :, None], 0, top).astype(np.int32)
    q_columns = np.empty((out_f, in_f), dtype=np.int32)
    q_columns[:, order] = q.reshape(out_f, in_f)  # back to the columns' own order
    return q_columns, zero, scale


def dequantized(q, zero, scale, column_group=None):
    """(q - zero) * scale in float32, each column by its group (column_group, or runs of columns)."""
    out_f, in_f = q.shape
    groups = zero.shape[1]
    g_of = column_group if column_group is not None else np.arange(in_f) // (in_f // groups)
    return ((q - zero[:, g_of]).astype(np.float32) * scale[:, g_of]).astype(np.float32)


def pack_along_rows(values, bits):
    """values [n, m] -> int32 [n * bits / 32, m]: rows k * per + j at bits * j of row k."""
    per = 32 // bits
    v = values.astype(np.uint32).reshape(values.shape[0] // per, per, values.shape[1])
    packed = np.zeros((v.shape[0], v.shape[2]), dtype=np.uint32)
    for j in range(per):
        packed |= v[:, j, :] << np.uint32(bits * j)
    return packed.view(np.int32)


def pack_along_columns(values, bits, order=None):
    """values [n, m] -> int32 [n, m * bits / 32]: column k * per + order[j] at bits * j of word k."""
    per = 32 // bits
    order = order or list(range(per))
    v = values.astype(np.uint32).reshape(values.shape[0], values.shape[1] // per, per)
    packed = np.zeros(v.shape[:2], dtype=np.uint32)
    for j in range(per):
        packed |= v[:, :, order[j]] << np.uint32(bits * j)
    return packed.view(np.int32)


def save(path, tensors):
    """A safetensors file; ("BF16", uint16 bits) pairs are written as BF16."""
    header, blobs, offset = {}, [], 0
    names = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32", np.dtype(np.int8): "I8",
             np.dtype(np.uint8): "F8_E4M3"}  # the only uint8 tensors written are FP8 codes
    for name, value in tensors.items():
        dtype, array = value if isinstance(value, tuple) else (names[value.dtype], value)
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--method", required=True, choices=sorted(METHODS))
    ap.add_argument("--group-size", type=int, default=64, help="-1: one group per row")
    ap.add_argument("--expected")
    ap.add_argument("--dequantized")
    ap.add_argument("--act-order", action="store_true", help="GPTQ: groups over a permutation of the columns (desc_act; g_idx)")
    ap.add_argument("--fp8-block", default="128,128", help="fp8, ct-fp8-block: rows,columns a scale covers")
    args = ap.parse_args()
    block_rows, block_columns = (int(v) for v in args.fp8_block.split(","))
    bits, symmetric = METHODS[args.method]
    group = args.group_size
    os.makedirs(args.out, exist_ok=True)
    for name in os.listdir(args.src):
        if name not in ("model.safetensors", "config.json"):
            shutil.copy(os.path.join(args.src, name), os.path.join(args.out, name))
    tensors = load_file(os.path.join(args.src, "model.safetensors"))
    out, expected = {}, {}
    rng = np.random.default_rng(7)
    scale_dtype = "BF16" if args.method.startswith("ct-") else "F16"
    for name, w in tensors.items():
        if not (name.startswith("model.layers.") and name.endswith("_proj.weight") and w.ndim == 2):
            out[name] = w
            continue
        stem = name[:-len(".weight")]
        if "fp8" in args.method:
            extent = {"fp8": (block_rows, block_columns), "ct-fp8": (1, 0), "ct-fp8-tensor": (0, 0), "ct-fp8-block": (block_rows, block_columns)}
            codes, scale, expected[stem] = fp8_quantize(w, *extent[args.method], "BF16" if args.method == "ct-fp8" else "F32")
            out[name] = codes
            if args.method == "fp8":
                out[stem + ".weight_scale_inv"] = scale
            elif args.method == "ct-fp8":
                out[stem + ".weight_scale"] = ("BF16", bf16_bits(scale))
            else:
                out[stem + ".weight_scale"] = scale.reshape(1) if args.method == "ct-fp8-tensor" else scale
            continue
        g = w.shape[1] if group < 0 else group
        # act-order: the groups follow a permutation of the columns (GPTQ quantizes them in the order of
        # the Hessian's diagonal), so g_idx is no longer i / group_size.
        column_group = (np.argsort(rng.permutation(w.shape[1])) // g).astype(np.int32) if args.act_order else None
        q, zero, scale = quantize(w, bits, symmetric, group, scale_dtype, column_group)
        expected[stem] = dequantized(q, zero, scale, column_group)
        if args.method.startswith("gptq"):
            out[stem + ".qweight"] = pack_along_rows(q.T, bits)
            out[stem + ".qzeros"] = pack_along_columns(((zero - 1) & ((1 << bits) - 1)).T, bits)
            out[stem + ".scales"] = f16(scale.T)
            out[stem + ".g_idx"] = column_group if args.act_order else np.arange(w.shape[1], dtype=np.int32) // g
        elif args.method == "awq":
            out[stem + ".qweight"] = pack_along_columns(q.T, 4, AWQ_ORDER)
            out[stem + ".qzeros"] = pack_along_columns(zero.T, 4, AWQ_ORDER)
            out[stem + ".scales"] = f16(scale.T)
        elif args.method == "ct-w4":
            out[stem + ".weight_packed"] = pack_along_columns(q, 4)  # q = signed value + 8
            out[stem + ".weight_scale"] = ("BF16", bf16_bits(scale))
            out[stem + ".weight_shape"] = np.array(w.shape, dtype=np.int32)
        else:  # ct-w8: int-quantized
            out[stem + ".weight"] = (q - 128).astype(np.int8)
            out[stem + ".weight_scale"] = ("BF16", bf16_bits(scale))
    save(os.path.join(args.out, "model.safetensors"), out)

    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    if args.method.startswith("gptq"):
        config["quantization_config"] = {"quant_method": "gptq", "bits": bits, "group_size": group, "sym": symmetric,
                                         "desc_act": args.act_order, "checkpoint_format": "gptq"}
    elif args.method == "awq":
        config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm"}
    elif args.method == "fp8":
        config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                         "weight_block_size": [block_rows, block_columns]}
    elif args.method.startswith("ct-fp8"):
        strategy = {"ct-fp8": "channel", "ct-fp8-tensor": "tensor", "ct-fp8-block": "block"}[args.method]
        weights = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": strategy, "dynamic": False}
        if strategy == "block":
            weights["block_structure"] = [block_rows, block_columns]
        groups = {"targets": ["Linear"], "weights": weights,
                  "input_activations": {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True, "strategy": "token"}}
        config["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"group_0": groups},
                                         "format": "float-quantized", "ignore": ["lm_head"]}
    else:
        weights = {"num_bits": bits, "type": "int", "symmetric": True,
                   "strategy": "channel" if group < 0 else "group", "group_size": None if group < 0 else group}
        groups = {"targets": ["Linear"], "weights": weights}
        if args.method == "ct-w8":
            groups["input_activations"] = {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": True, "strategy": "token"}
        config["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"group_0": groups},
                                         "format": "pack-quantized" if args.method == "ct-w4" else "int-quantized",
                                         "ignore": ["lm_head"]}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if args.expected:
        np.savez(args.expected, **expected)
    if args.dequantized:
        os.makedirs(args.dequantized, exist_ok=True)
        for name in os.listdir(args.src):
            if name != "model.safetensors":
                shutil.copy(os.path.join(args.src, name), os.path.join(args.dequantized, name))
        reference = {n: (expected[n[:-len(".weight")]] if n[:-len(".weight")] in expected else w) for n, w in tensors.items()}
        save(os.path.join(args.dequantized, "model.safetensors"), {n: w.astype(np.float32) if n[:-len(".weight")] in expected else w
                                                                   for n, w in reference.items()})


if __name__ == "__main__":
    main()
