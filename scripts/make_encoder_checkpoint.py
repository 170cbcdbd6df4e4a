#!/usr/bin/env python3
"""Write a synthetic XLM-RoBERTa encoder folder as sentence-transformers models publish them (multilingual
E5, BGE-M3): config.json (model_type xlm-roberta, pad_token_id 1: position embeddings start at 2),
model.safetensors with random F32 weights under XLMRobertaModel's names, tokenizer.json from a real
unigram vocabulary (a llama.cpp "t5" vocab suite, as make_hf_checkpoint.py --vocab-from writes it:
Precompiled character map, Metaspace, <s> $A </s>), tokenizer_config.json, and mean pooling
(modules.json, 1_Pooling/config.json). Only numpy, safetensors, tokenizers and gguf.

usage: make_encoder_checkpoint.py --vocab-from GGUF --out DIR [--layers N] [--dim D] [--seed S]
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file

from make_hf_checkpoint import tokenizer_from_gguf


def weights(vocab, dim, layers, ff, positions, rng):
    def w(*shape, scale=None):
        return (rng.standard_normal(shape) * (scale or 1.0 / np.sqrt(shape[-1]))).astype(np.float32)

    t = {"embeddings.word_embeddings.weight": w(vocab, dim, scale=0.5),
         "embeddings.position_embeddings.weight": w(positions, dim, scale=0.2),
         "embeddings.token_type_embeddings.weight": w(1, dim, scale=0.1),
         "embeddings.LayerNorm.weight": 1.0 + w(dim, scale=0.1), "embeddings.LayerNorm.bias": w(dim, scale=0.1)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for m in ("query", "key", "value"):
            t[p + f"attention.self.{m}.weight"] = w(dim, dim)
            t[p + f"attention.self.{m}.bias"] = w(dim, scale=0.1)
        t[p + "attention.output.dense.weight"], t[p + "attention.output.dense.bias"] = w(dim, dim), w(dim, scale=0.1)
        t[p + "attention.output.LayerNorm.weight"], t[p + "attention.output.LayerNorm.bias"] = 1.0 + w(dim, scale=0.1), w(dim, scale=0.1)
        t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = w(ff, dim), w(ff, scale=0.1)
        t[p + "output.dense.weight"], t[p + "output.dense.bias"] = w(dim, ff), w(dim, scale=0.1)
        t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"] = 1.0 + w(dim, scale=0.1), w(dim, scale=0.1)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-from", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tok, kind, bos, eos = tokenizer_from_gguf(args.vocab_from)
    if kind != "t5":
        raise SystemExit(f"{args.vocab_from}: a {kind} vocabulary; XLM-RoBERTa's is a unigram (t5) one")
    os.makedirs(os.path.join(args.out, "1_Pooling"), exist_ok=True)
    vocab, positions = tok.get_vocab_size(with_added_tokens=True), 2 + 128
    save_file(weights(vocab, args.dim, args.layers, 2 * args.dim, positions, np.random.default_rng(args.seed)),
              os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "vocab_size": vocab, "hidden_size": args.dim,
              "num_hidden_layers": args.layers, "num_attention_heads": 2, "intermediate_size": 2 * args.dim,
              "hidden_act": "gelu", "max_position_embeddings": positions, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
              "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "position_embedding_type": "absolute", "torch_dtype": "float32"}
    json.dump(config, open(os.path.join(args.out, "config.json"), "w"), indent=2)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    json.dump({"bos_token": bos, "eos_token": eos, "unk_token": "<unk>", "pad_token": "<pad>", "cls_token": bos, "sep_token": eos,
               "mask_token": "<mask>", "model_max_length": positions - 2, "tokenizer_class": "XLMRobertaTokenizer"},
              open(os.path.join(args.out, "tokenizer_config.json"), "w"), indent=2)
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}],
              open(os.path.join(args.out, "modules.json"), "w"), indent=2)
    json.dump({"word_embedding_dimension": args.dim, "pooling_mode_mean_tokens": True},
              open(os.path.join(args.out, "1_Pooling", "config.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
