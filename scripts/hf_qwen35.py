"""Qwen 3.5 for make_hf_checkpoint.py: a hybrid decoder's weights as Qwen3_5ForCausalLM publishes them,
its config keys, and the GGUF tensors llama.cpp's converter makes of them (conversion/qwen.py:
Qwen3NextModel.modify_tensors and _LinearAttentionVReorderBase). Every full_attention_interval-th layer
is gated attention (q_proj holds each head's q then its gate; q/k norms), the others Gated DeltaNet
(linear_attn.*). The converter tiles the value heads (the checkpoint groups them by key head), writes
A = -exp(A_log), squeezes conv1d and keeps it F32, and stores the zero-centred norms as 1 + w (not the
DeltaNet's own norm)."""
import numpy as np

INTERVAL = 2  # layer 0 Gated DeltaNet, layer 1 attention
LINEAR = dict(n_k=2, n_v=4, d_k=32, d_v=32, kernel=4)  # two value heads per key head: their order matters
MROPE_SECTION = [2, 1, 1]  # pairs of the rotary quarter of a 32-wide head


def is_recurrent(il):
    return (il + 1) % INTERVAL != 0


def weights(shape, w):
    """Qwen3_5ForCausalLM's tensors; w(*shape, scale=None) draws random float32 weights."""
    dim, n_heads, n_kv, hd, ff, vocab = (shape[k] for k in ("dim", "heads", "kv_heads", "head_dim", "ff", "vocab"))
    n_k, n_v, d_k, d_v, kernel = (LINEAR[k] for k in ("n_k", "n_v", "d_k", "d_v", "kernel"))
    conv = 2 * n_k * d_k + n_v * d_v
    t = {"model.embed_tokens.weight": w(vocab, dim, scale=0.5), "model.norm.weight": 0.1 * w(dim, scale=1.0)}
    if not shape["tied"]:
        t["lm_head.weight"] = w(vocab, dim)
    for il in range(shape["layers"]):
        p = f"model.layers.{il}."
        t[p + "input_layernorm.weight"] = 0.1 * w(dim, scale=1.0)
        t[p + "post_attention_layernorm.weight"] = 0.1 * w(dim, scale=1.0)
        if is_recurrent(il):
            a = p + "linear_attn."
            t[a + "in_proj_qkv.weight"] = w(conv, dim)
            t[a + "in_proj_z.weight"] = w(n_v * d_v, dim)
            t[a + "in_proj_b.weight"] = w(n_v, dim)
            t[a + "in_proj_a.weight"] = w(n_v, dim, scale=0.5 / np.sqrt(dim))
            t[a + "conv1d.weight"] = w(conv, 1, kernel, scale=0.5)
            t[a + "dt_bias"] = w(n_v, scale=0.3) - 2.0
            t[a + "A_log"] = w(n_v, scale=0.2)
            t[a + "norm.weight"] = 1.0 + 0.1 * w(d_v, scale=1.0)
            t[a + "out_proj.weight"] = w(dim, n_v * d_v)
        else:
            s = p + "self_attn."
            t[s + "q_proj.weight"] = w(2 * n_heads * hd, dim)  # per head: q, then its output gate
            t[s + "k_proj.weight"] = w(n_kv * hd, dim)
            t[s + "v_proj.weight"] = w(n_kv * hd, dim)
            t[s + "o_proj.weight"] = w(dim, n_heads * hd)
            t[s + "q_norm.weight"] = 0.1 * w(hd, scale=1.0)
            t[s + "k_norm.weight"] = 0.1 * w(hd, scale=1.0)
        t[p + "mlp.gate_proj.weight"] = w(ff, dim)
        t[p + "mlp.up_proj.weight"] = w(ff, dim)
        t[p + "mlp.down_proj.weight"] = w(dim, ff)
    return t


def config(shape, base):
    """config.json: the decoder's keys (base) plus Qwen 3.5's; rope in rope_parameters."""
    c = dict(base)
    for key in ("rope_theta", "rope_scaling"):
        c.pop(key, None)
    c.update(linear_conv_kernel_dim=LINEAR["kernel"], linear_key_head_dim=LINEAR["d_k"], linear_value_head_dim=LINEAR["d_v"],
             linear_num_key_heads=LINEAR["n_k"], linear_num_value_heads=LINEAR["n_v"], full_attention_interval=INTERVAL,
             layer_types=["linear_attention" if is_recurrent(il) else "full_attention" for il in range(shape["layers"])],
             attn_output_gate=True,
             rope_parameters={"rope_type": "default", "rope_theta": shape["rope_theta"], "partial_rotary_factor": 0.25,
                              "mrope_section": MROPE_SECTION, "mrope_interleaved": True})
    return c


def wrapped(text_config, tensors):
    """Qwen3_5ForConditionalGeneration, as the releases ship: the text model under model.language_model,
    its config as text_config, and a vision tower Loom leaves unread."""
    text = {k: v for k, v in text_config.items() if k not in ("architectures", "torch_dtype")}
    config = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": text,
              "vision_config": {"model_type": "qwen3_5", "hidden_size": 32, "depth": 1, "patch_size": 16},
              "torch_dtype": text_config["torch_dtype"], "eos_token_id": text_config["eos_token_id"]}
    renamed = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): a for n, a in tensors.items()}
    renamed["model.visual.patch_embed.proj.weight"] = np.full((32, 3, 2, 16, 16), 0.01, dtype=np.float32)
    return config, renamed


def tile_value_heads(array, axis, first, head):
    """The converter's _reorder_v_heads over [first, first + n_v * head) of `axis`: grouped by key head
    (k, j) -> tiled (j, k)."""
    n_k, n_v = LINEAR["n_k"], LINEAR["n_v"]
    array = np.moveaxis(array, axis, 0)
    part = array[first:first + n_v * head]
    part = part.reshape(n_k, n_v // n_k, head, *part.shape[1:]).swapaxes(0, 1).reshape(part.shape)
    return np.moveaxis(np.concatenate([array[:first], part, array[first + n_v * head:]]), 0, axis)


def write_gguf_keys(w, arch, shape):
    w.add_uint32(f"{arch}.full_attention_interval", INTERVAL)
    w.add_uint32(f"{arch}.ssm.conv_kernel", LINEAR["kernel"])
    w.add_uint32(f"{arch}.ssm.state_size", LINEAR["d_k"])
    w.add_uint32(f"{arch}.ssm.group_count", LINEAR["n_k"])
    w.add_uint32(f"{arch}.ssm.time_step_rank", LINEAR["n_v"])
    w.add_uint32(f"{arch}.ssm.inner_size", LINEAR["n_v"] * LINEAR["d_v"])
    w.add_uint32(f"{arch}.rope.dimension_count", shape["head_dim"] // 4)
    w.add_array(f"{arch}.rope.dimension_sections", MROPE_SECTION + [0])


LAYER_NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
               "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
               "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
               "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
               "linear_attn.in_proj_qkv.weight": "attn_qkv.weight", "linear_attn.in_proj_z.weight": "attn_gate.weight",
               "linear_attn.in_proj_b.weight": "ssm_beta.weight", "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
               "linear_attn.conv1d.weight": "ssm_conv1d.weight", "linear_attn.dt_bias": "ssm_dt.bias", "linear_attn.A_log": "ssm_a",
               "linear_attn.norm.weight": "ssm_norm.weight", "linear_attn.out_proj.weight": "ssm_out.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def gguf_tensors(tensors, stored, as_f32, plus_one, dtype):
    """(GGUF name, array, float kind) per tensor, the converter's rewriting applied: kind "F32" for what it
    writes as F32, else the checkpoint's dtype. stored(a) gives a as the checkpoint holds it, as_f32(a)
    those values widened to F32, plus_one(a) 1 + a as the converter adds it."""
    qk_rows, d_v = 2 * LINEAR["n_k"] * LINEAR["d_k"], LINEAR["d_v"]
    out = []
    for name, array in tensors.items():
        if not name.startswith("model.layers."):
            gname = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                     "lm_head.weight": "output.weight"}[name]
            out.append((gname, plus_one(array) if name == "model.norm.weight" else array, "F32" if array.ndim == 1 else dtype))
            continue
        il, rest = name[len("model.layers."):].split(".", 1)
        gname = f"blk.{il}.{LAYER_NAMES[rest]}"
        if rest.endswith("layernorm.weight") or rest in ("self_attn.q_norm.weight", "self_attn.k_norm.weight"):
            out.append((gname, plus_one(array), "F32"))
        elif rest == "linear_attn.A_log":
            a = -np.exp(as_f32(array).astype(np.float64)).astype(np.float32)
            if dtype == "F16":
                a = a.astype(np.float16).astype(np.float32)
            out.append((gname, tile_value_heads(a, 0, 0, 1), "F32"))
        elif rest == "linear_attn.conv1d.weight":
            out.append((gname, tile_value_heads(as_f32(array).squeeze(1), 0, qk_rows, d_v), "F32"))
        elif rest == "linear_attn.in_proj_qkv.weight":
            out.append((gname, tile_value_heads(array, 0, qk_rows, d_v), dtype))
        elif rest == "linear_attn.in_proj_z.weight":
            out.append((gname, tile_value_heads(array, 0, 0, d_v), dtype))
        elif rest in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight"):
            out.append((gname, tile_value_heads(array, 0, 0, 1), dtype))
        elif rest == "linear_attn.dt_bias":
            out.append((gname, tile_value_heads(as_f32(array), 0, 0, 1), "F32"))
        elif rest == "linear_attn.out_proj.weight":
            out.append((gname, tile_value_heads(array, 1, 0, d_v), dtype))
        else:
            out.append((gname, as_f32(array) if array.ndim == 1 else array, "F32" if array.ndim == 1 else dtype))
    return out
