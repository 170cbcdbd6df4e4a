"""Gemma 4 for make_hf_checkpoint.py: a decoder's weights as Gemma4ForCausalLM publishes them
(transformers' modeling_gemma4.py), its config keys, and the GGUF llama.cpp's converter makes of them
(conversion/gemma.py, Gemma4Model). Every feature of the released models at once:
  - sliding layers (head_dim, KV_SWA heads) and every third layer full (GLOBAL_HEAD_DIM, one KV head with
    attention_k_eq_v: keys serve as values, so no v_proj), full layers with "proportional" rope (the
    converter's rope_freqs keeps all but the first quarter of the pairs still);
  - the last SHARED layers read the KV of the last sliding and full layer before them (no k/v weights of
    their own) and have FFNs twice as wide (use_double_wide_mlp);
  - per-layer embeddings (PLE values per layer and token) and a scalar per layer (layer_scalar).
Gemma 4's norms scale by w (not 1 + w): the converter writes them as they are, in F32."""
import numpy as np

LAYERS = 6
GLOBAL_HEAD_DIM = 64  # the sliding layers' head_dim is the shape's (32)
KV_GLOBAL = 1
SHARED = 3  # layers 3, 4, 5 read layer 1's (sliding) and layer 2's (full) KV
PLE = 16  # shape["ple"] when given (0: no per-layer embeddings)
FULL_ROPE = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}
SLIDING_ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def is_full(il):
    return (il + 1) % 3 == 0


def owns_kv(il):
    return il < LAYERS - SHARED


def layer_shape(shape, il):
    """(head size, KV heads, FFN width) of layer il."""
    full = is_full(il)
    return (GLOBAL_HEAD_DIM if full else shape["head_dim"], KV_GLOBAL if full else shape["kv_heads"],
            shape["ff"] if owns_kv(il) else 2 * shape["ff"])


def weights(shape, w):
    """The checkpoint's tensors; w(*shape, scale=None) draws random float32 weights."""
    dim, n_heads, vocab, ple = shape["dim"], shape["heads"], shape["vocab"], shape.get("ple", PLE)

    def norm(n, scale=1.0):
        return scale * (1.0 + 0.1 * w(n, scale=1.0))

    t = {"model.embed_tokens.weight": w(vocab, dim, scale=0.05), "model.norm.weight": norm(dim)}
    if ple:
        t.update({"model.embed_tokens_per_layer.weight": w(vocab, LAYERS * ple, scale=0.25),
                  "model.per_layer_model_projection.weight": w(LAYERS * ple, dim, scale=1.0),
                  "model.per_layer_projection_norm.weight": norm(ple)})
    for il in range(LAYERS):
        p, s = f"model.layers.{il}.", f"model.layers.{il}.self_attn."
        hd, kv, ff = layer_shape(shape, il)
        # q·k is unscaled: trained q/k norms do the 1/sqrt(head_dim), as these do.
        qk = 1.0 / np.sqrt(np.sqrt(hd))
        t[p + "input_layernorm.weight"] = norm(dim)
        t[s + "q_proj.weight"] = w(n_heads * hd, dim)
        t[s + "q_norm.weight"] = norm(hd, qk)
        if owns_kv(il):
            t[s + "k_proj.weight"] = w(kv * hd, dim)
            if not is_full(il):  # attention_k_eq_v: the full layers' keys are their values
                t[s + "v_proj.weight"] = w(kv * hd, dim)
            t[s + "k_norm.weight"] = norm(hd, qk)
        t[s + "o_proj.weight"] = w(dim, n_heads * hd)
        t[p + "post_attention_layernorm.weight"] = norm(dim)
        t[p + "pre_feedforward_layernorm.weight"] = norm(dim)
        t[p + "post_feedforward_layernorm.weight"] = norm(dim)
        t[p + "mlp.gate_proj.weight"] = w(ff, dim)
        t[p + "mlp.up_proj.weight"] = w(ff, dim)
        t[p + "mlp.down_proj.weight"] = w(dim, ff)
        if ple:
            t[p + "per_layer_input_gate.weight"] = w(ple, dim)
            t[p + "per_layer_projection.weight"] = w(dim, ple)
            t[p + "post_per_layer_input_norm.weight"] = norm(dim)
        t[p + "layer_scalar"] = (0.5 + 0.5 * np.abs(w(1, scale=1.0))).astype(np.float32)
    return t


def config(shape, base):
    """config.json: the decoder's keys (base) with Gemma 4's."""
    c = {k: v for k, v in base.items() if k not in ("hidden_act", "rope_theta", "rope_scaling")}
    c.update(num_hidden_layers=LAYERS, hidden_activation="gelu_pytorch_tanh", sliding_window=shape["window"],
             layer_types=["full_attention" if is_full(il) else "sliding_attention" for il in range(LAYERS)],
             global_head_dim=GLOBAL_HEAD_DIM, num_global_key_value_heads=KV_GLOBAL, attention_k_eq_v=True,
             num_kv_shared_layers=SHARED, use_double_wide_mlp=True, hidden_size_per_layer_input=shape.get("ple", PLE),
             vocab_size_per_layer_input=shape["vocab"], final_logit_softcapping=30.0, enable_moe_block=False,
             rope_parameters={"full_attention": FULL_ROPE, "sliding_attention": SLIDING_ROPE}, tie_word_embeddings=True)
    return c


def wrapped(text_config, tensors):
    """Gemma4ForConditionalGeneration, as the releases ship: the text model under model.language_model,
    its config as text_config, and vision tensors Loom leaves unread."""
    text = {k: v for k, v in text_config.items() if k not in ("architectures", "torch_dtype")}
    text["model_type"] = "gemma4_text"
    config = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text,
              "vision_config": {"model_type": "gemma4_vision", "hidden_size": 32, "num_hidden_layers": 1},
              "audio_config": None, "torch_dtype": text_config["torch_dtype"], "eos_token_id": text_config["eos_token_id"]}
    renamed = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): a for n, a in tensors.items()}
    renamed["model.vision_tower.patch_embedder.input_proj.weight"] = np.full((32, 768), 0.01, dtype=np.float32)
    return config, renamed


def write_gguf_keys(w, arch, shape):
    """What Gemma4Model.set_gguf_parameters writes beyond make_hf_checkpoint's common keys (which it
    replaces: feed_forward_length and head_count_kv per layer, the full layers' head size)."""
    layers = [layer_shape(shape, il) for il in range(LAYERS)]
    w.add_array(f"{arch}.feed_forward_length", [ff for _, _, ff in layers])
    w.add_array(f"{arch}.attention.head_count_kv", [kv for _, kv, _ in layers])
    w.add_uint32(f"{arch}.attention.key_length", GLOBAL_HEAD_DIM)
    w.add_uint32(f"{arch}.attention.value_length", GLOBAL_HEAD_DIM)
    w.add_uint32(f"{arch}.attention.key_length_swa", shape["head_dim"])
    w.add_uint32(f"{arch}.attention.value_length_swa", shape["head_dim"])
    w.add_array(f"{arch}.attention.sliding_window_pattern", [not is_full(il) for il in range(LAYERS)])
    w.add_uint32(f"{arch}.attention.shared_kv_layers", SHARED)
    w.add_uint32(f"{arch}.embedding_length_per_layer_input", shape.get("ple", PLE))
    w.add_uint32(f"{arch}.rope.dimension_count", GLOBAL_HEAD_DIM)
    w.add_uint32(f"{arch}.rope.dimension_count_swa", shape["head_dim"])
    w.add_float32(f"{arch}.rope.freq_base_swa", SLIDING_ROPE["rope_theta"])
    w.add_float32(f"{arch}.final_logit_softcapping", 30.0)
    w.add_uint32(f"{arch}.attention.sliding_window", shape["window"])


def rope_freqs():
    """Gemma4Model.generate_extra_tensors: 1 for the rotated quarter of the full head's pairs, 1e30 after."""
    rotated = int(GLOBAL_HEAD_DIM * FULL_ROPE["partial_rotary_factor"] / 2)
    return np.array([1.0] * rotated + [1e30] * (GLOBAL_HEAD_DIM // 2 - rotated), dtype=np.float32)


GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
                "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
                "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight"}
LAYER_NAMES = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
               "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
               "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
               "self_attn.k_norm.weight": "attn_k_norm.weight", "post_attention_layernorm.weight": "post_attention_norm.weight",
               "pre_feedforward_layernorm.weight": "ffn_norm.weight", "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
               "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
               "per_layer_input_gate.weight": "inp_gate.weight", "per_layer_projection.weight": "proj.weight",
               "post_per_layer_input_norm.weight": "post_norm.weight", "layer_scalar": "layer_output_scale.weight"}


def gguf_tensors(tensors, dtype):
    """(GGUF name, array, float kind) per tensor as the converter writes it: "F32" for vectors (norms, the
    layer scalars), else the checkpoint's dtype. rope_freqs (rope_freqs()) comes beside them."""
    out = []
    for name, array in tensors.items():
        if name.startswith("model.layers."):
            il, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{il}.{LAYER_NAMES[rest]}"
        else:
            gname = GLOBAL_NAMES[name]
        out.append((gname, array, "F32" if array.ndim == 1 else dtype))
    return out
