"""Qwen 3.5 for make_hf_checkpoint.py: a hybrid decoder's weights as Qwen3_5ForCausalLM publishes them
(variant "dense"; "moe": Qwen3_5MoeForCausalLM's router, experts and shared expert; "next":
Qwen3NextForCausalLM, the same MoE layers with in_proj_qkvz and in_proj_ba fused per key head and its
value heads left grouped), its config keys, and the GGUF tensors llama.cpp's converter makes of them
(conversion/qwen.py: Qwen3NextModel.modify_tensors and _LinearAttentionVReorderBase). Every full_attention_interval-th layer
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


def weights(shape, w, variant):
    """The checkpoint's tensors; w(*shape, scale=None) draws random float32 weights."""
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
            if variant == "next":  # per key head: q, k, v, z rows; b rows then a rows
                t[a + "in_proj_qkvz.weight"] = w(n_k * (2 * d_k + 2 * n_v // n_k * d_v), dim)
                t[a + "in_proj_ba.weight"] = w(2 * n_v, dim, scale=0.75 / np.sqrt(dim))
            else:
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
        if variant == "dense":
            t[p + "mlp.gate_proj.weight"] = w(ff, dim)
            t[p + "mlp.up_proj.weight"] = w(ff, dim)
            t[p + "mlp.down_proj.weight"] = w(dim, ff)
            continue
        n_exp, eff = shape["experts"], shape["expert_ff"]
        t[p + "mlp.gate.weight"] = w(n_exp, dim, scale=0.5)
        for e in range(n_exp):
            t[p + f"mlp.experts.{e}.gate_proj.weight"] = w(eff, dim)
            t[p + f"mlp.experts.{e}.up_proj.weight"] = w(eff, dim)
            t[p + f"mlp.experts.{e}.down_proj.weight"] = w(dim, eff)
        t[p + "mlp.shared_expert_gate.weight"] = w(1, dim)
        t[p + "mlp.shared_expert.gate_proj.weight"] = w(ff, dim)
        t[p + "mlp.shared_expert.up_proj.weight"] = w(ff, dim)
        t[p + "mlp.shared_expert.down_proj.weight"] = w(dim, ff)
    return t


def config(shape, base, variant):
    """config.json: the decoder's keys (base) plus Qwen 3.5's; rope in rope_parameters (Qwen3-Next: plain
    partial rope, no sections)."""
    c = dict(base)
    for key in ("rope_theta", "rope_scaling"):
        c.pop(key, None)
    c.update(linear_conv_kernel_dim=LINEAR["kernel"], linear_key_head_dim=LINEAR["d_k"], linear_value_head_dim=LINEAR["d_v"],
             linear_num_key_heads=LINEAR["n_k"], linear_num_value_heads=LINEAR["n_v"], full_attention_interval=INTERVAL,
             layer_types=["linear_attention" if is_recurrent(il) else "full_attention" for il in range(shape["layers"])],
             attn_output_gate=True,
             rope_parameters={"rope_type": "default", "rope_theta": shape["rope_theta"], "partial_rotary_factor": 0.25,
                              "mrope_section": MROPE_SECTION, "mrope_interleaved": True})
    if variant == "next":
        c["rope_parameters"] = {"rope_type": "default", "rope_theta": shape["rope_theta"], "partial_rotary_factor": 0.25}
    if variant != "dense":
        c.update(num_experts=shape["experts"], num_experts_per_tok=2, moe_intermediate_size=shape["expert_ff"],
                 shared_expert_intermediate_size=shape["ff"], norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[])
    return c


def wrapped(text_config, tensors, variant):
    """Qwen3_5(Moe)ForConditionalGeneration, as the releases ship: the text model under
    model.language_model, its config as text_config, and a vision tower Loom leaves unread."""
    text = {k: v for k, v in text_config.items() if k not in ("architectures", "torch_dtype")}
    moe = "Moe" if variant == "moe" else ""
    config = {"architectures": [f"Qwen3_5{moe}ForConditionalGeneration"], "model_type": "qwen3_5_moe" if moe else "qwen3_5",
              "text_config": text,
              "vision_config": {"model_type": "qwen3_5", "hidden_size": 32, "depth": 1, "patch_size": 16},
              "torch_dtype": text_config["torch_dtype"], "eos_token_id": text_config["eos_token_id"]}
    renamed = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): a for n, a in tensors.items()}
    renamed["model.visual.patch_embed.proj.weight"] = np.full((32, 3, 2, 16, 16), 0.01, dtype=np.float32)
    return config, renamed


def tile_value_heads(array, axis, first, head, tiles=True):
    """The converter's _reorder_v_heads over [first, first + n_v * head) of `axis`: grouped by key head
    (k, j) -> tiled (j, k); as it is without tiles (Qwen3-Next)."""
    n_k, n_v = LINEAR["n_k"], LINEAR["n_v"]
    if not tiles:
        return array
    array = np.moveaxis(array, axis, 0)
    part = array[first:first + n_v * head]
    part = part.reshape(n_k, n_v // n_k, head, *part.shape[1:]).swapaxes(0, 1).reshape(part.shape)
    return np.moveaxis(np.concatenate([array[:first], part, array[first + n_v * head:]]), 0, axis)


def write_gguf_keys(w, arch, shape, variant):
    w.add_uint32(f"{arch}.full_attention_interval", INTERVAL)
    w.add_uint32(f"{arch}.ssm.conv_kernel", LINEAR["kernel"])
    w.add_uint32(f"{arch}.ssm.state_size", LINEAR["d_k"])
    w.add_uint32(f"{arch}.ssm.group_count", LINEAR["n_k"])
    w.add_uint32(f"{arch}.ssm.time_step_rank", LINEAR["n_v"])
    w.add_uint32(f"{arch}.ssm.inner_size", LINEAR["n_v"] * LINEAR["d_v"])
    w.add_uint32(f"{arch}.rope.dimension_count", shape["head_dim"] // 4)
    if variant != "next":
        w.add_array(f"{arch}.rope.dimension_sections", MROPE_SECTION + [0])
    if variant != "dense":  # the expert keys are make_hf_checkpoint's, beside the shared expert's
        w.add_expert_shared_feed_forward_length(shape["ff"])


LAYER_NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
               "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
               "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
               "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
               "linear_attn.in_proj_qkv.weight": "attn_qkv.weight", "linear_attn.in_proj_z.weight": "attn_gate.weight",
               "linear_attn.in_proj_b.weight": "ssm_beta.weight", "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
               "linear_attn.conv1d.weight": "ssm_conv1d.weight", "linear_attn.dt_bias": "ssm_dt.bias", "linear_attn.A_log": "ssm_a",
               "linear_attn.norm.weight": "ssm_norm.weight", "linear_attn.out_proj.weight": "ssm_out.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
               "mlp.gate.weight": "ffn_gate_inp.weight", "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
               "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
               "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight", "mlp.experts.gate_proj": "ffn_gate_exps.weight",
               "mlp.experts.up_proj": "ffn_up_exps.weight", "mlp.experts.down_proj": "ffn_down_exps.weight"}


def split_qkvz(array):
    """Qwen3-Next's in_proj_qkvz rows, per key head q, k, v, z: every q, then every k, then every v
    (attn_qkv), and the z rows (attn_gate), as Qwen3NextModel.modify_tensors splits them."""
    n_k, d_k, v_rows = LINEAR["n_k"], LINEAR["d_k"], LINEAR["n_v"] // LINEAR["n_k"] * LINEAR["d_v"]
    heads = array.reshape(n_k, 2 * d_k + 2 * v_rows, -1)
    q, k, v, z = np.split(heads, [d_k, 2 * d_k, 2 * d_k + v_rows], axis=1)
    rows = lambda part: part.reshape(-1, array.shape[1])  # noqa: E731
    return np.concatenate([rows(q), rows(k), rows(v)]), rows(z)


def gguf_tensors(tensors, stored, as_f32, plus_one, dtype, variant, n_experts):
    """(GGUF name, array, float kind) per tensor, the converter's rewriting applied: kind "F32" for what it
    writes as F32, else the checkpoint's dtype. stored(a) gives a as the checkpoint holds it, as_f32(a)
    those values widened to F32, plus_one(a) 1 + a as the converter adds it."""
    qk_rows, d_v, tiles = 2 * LINEAR["n_k"] * LINEAR["d_k"], LINEAR["d_v"], variant != "next"
    tensors = dict(tensors)
    for il in range(max((int(n.split(".")[2]) for n in tensors if n.startswith("model.layers.")), default=-1) + 1):
        for m in ("gate_proj", "up_proj", "down_proj"):  # the converter stacks the experts
            names = [f"model.layers.{il}.mlp.experts.{e}.{m}.weight" for e in range(n_experts)]
            if names and names[0] in tensors:
                tensors[f"model.layers.{il}.mlp.experts.{m}"] = np.stack([tensors.pop(n) for n in names])
    out = []
    for name, array in tensors.items():
        if not name.startswith("model.layers."):
            gname = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                     "lm_head.weight": "output.weight"}[name]
            out.append((gname, plus_one(array) if name == "model.norm.weight" else array, "F32" if array.ndim == 1 else dtype))
            continue
        il, rest = name[len("model.layers."):].split(".", 1)
        gname = f"blk.{il}.{LAYER_NAMES.get(rest, rest)}"
        if rest.endswith("layernorm.weight") or rest in ("self_attn.q_norm.weight", "self_attn.k_norm.weight"):
            out.append((gname, plus_one(array), "F32"))
        elif rest == "linear_attn.A_log":
            a = -np.exp(as_f32(array).astype(np.float64)).astype(np.float32)
            if dtype == "F16":
                a = a.astype(np.float16).astype(np.float32)
            out.append((gname, tile_value_heads(a, 0, 0, 1, tiles), "F32"))
        elif rest == "linear_attn.conv1d.weight":
            out.append((gname, tile_value_heads(as_f32(array).squeeze(1), 0, qk_rows, d_v, tiles), "F32"))
        elif rest == "linear_attn.in_proj_qkv.weight":
            out.append((gname, tile_value_heads(array, 0, qk_rows, d_v), dtype))
        elif rest == "linear_attn.in_proj_qkvz.weight":
            qkv, z = split_qkvz(array)
            out += [(f"blk.{il}.attn_qkv.weight", qkv, dtype), (f"blk.{il}.attn_gate.weight", z, dtype)]
        elif rest == "linear_attn.in_proj_ba.weight":
            out.append((f"blk.{il}.ssm_ba.weight", array, dtype))
        elif rest == "linear_attn.in_proj_z.weight":
            out.append((gname, tile_value_heads(array, 0, 0, d_v), dtype))
        elif rest in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight"):
            out.append((gname, tile_value_heads(array, 0, 0, 1), dtype))
        elif rest == "linear_attn.dt_bias":
            out.append((gname, tile_value_heads(as_f32(array), 0, 0, 1, tiles), "F32"))
        elif rest == "linear_attn.out_proj.weight":
            out.append((gname, tile_value_heads(array, 1, 0, d_v, tiles), dtype))
        else:
            out.append((gname, as_f32(array) if array.ndim == 1 else array, "F32" if array.ndim == 1 else dtype))
    return out
