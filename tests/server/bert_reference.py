"""A BERT (or XLM-RoBERTa) forward in numpy, straight from a Hugging Face folder (config.json, model.safetensors,
tokenizer.json through the `tokenizers` library): the reference Loom's embeddings of the same folder are
checked against. Written from the architecture (post-norm blocks, exact GELU as transformers' "gelu"),
sharing nothing with Loom."""
import json
import math
import os
import struct

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] not in dtypes:
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=dtypes[t["dtype"]]).reshape(t["shape"]).astype(np.float64)
    return out


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu(x):  # transformers' "gelu": the exact erf form
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


class Bert:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        self.w = load_safetensors(os.path.join(folder, "model.safetensors"))
        from tokenizers import Tokenizer
        self.tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.tokenizer.no_padding()  # the file pads to 128 for batched training
        self.tokenizer.no_truncation()

    def tokens(self, text):
        return self.tokenizer.encode(text).ids

    def embed(self, ids):
        """The mean of the final rows, L2-normalised (sentence-transformers' all-MiniLM pipeline)."""
        c, w = self.config, self.w
        eps, heads = c["layer_norm_eps"], c["num_attention_heads"]
        n = len(ids)
        # RoBERTa numbers positions from pad_token_id + 1.
        first = c["pad_token_id"] + 1 if c.get("model_type") == "xlm-roberta" else 0
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][first:first + n] + \
            w["embeddings.token_type_embeddings.weight"][0]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            lin = lambda t, name: t @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            q, k, v = (lin(x, "attention.self." + m).reshape(n, heads, -1).transpose(1, 0, 2) for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            a = (scores / scores.sum(-1, keepdims=True)) @ v
            a = a.transpose(1, 0, 2).reshape(n, -1)
            x = layer_norm(x + lin(a, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], eps)
            h = lin(gelu(lin(x, "intermediate.dense")), "output.dense")
            x = layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        e = x.mean(0)
        return e / np.linalg.norm(e)
