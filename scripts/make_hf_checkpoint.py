#!/usr/bin/env python3
"""Write a synthetic Hugging Face checkpoint folder and the GGUF llama.cpp's converter makes of it.

A small decoder of one family (llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, gemma2, gemma3_text, gemma4_text: hf_gemma4.py,
phi3, olmo2, smollm3, granite, gpt_oss, qwen3_5_text: hf_qwen35.py) with random weights, written as it is published (config.json,
model.safetensors or shards with model.safetensors.index.json, tokenizer.json trained here by the
`tokenizers` package, tokenizer_config.json with a chat template, generation_config.json), and beside
it the same weights as a GGUF file written with gguf-py in llama.cpp's layout: its tensor names, its
metadata keys, Llama's q/k rows interleaved as convert_hf_to_gguf.py's LlamaModel.permute does, norms
as F32. Loom must read the two identically (tests/hf/test_hf_decoders.py). Only numpy, safetensors,
tokenizers and gguf: no torch, no transformers.

usage: make_hf_checkpoint.py --family {gemma2,gemma3_text,gemma4_text,gpt_oss,granite,llama,mistral,olmo2,phi3,qwen2,qwen2_moe,qwen3,qwen3_5_text,
                                      qwen3_moe,smollm3} --out DIR [--gguf FILE]
       [--dtype F16|BF16|F32] [--shards N] [--tied] [--fused-experts] [--seed S] [--vocab-from GGUF]
"""
import argparse
import json
import os

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

import hf_gemma4
import hf_qwen35

# The split patterns as the models' tokenizer.json files publish them (tokenizers' syntax).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# A real vocabulary's pre-tokenizer as its model publishes it in tokenizer.json, by llama.cpp's name for
# it: (split pattern, ignore_merges); None is ByteLevel's own GPT-2 regex, "digits" Digits then that.
PUBLISHED_PRE_TOKENIZERS = {
    "gpt-2": (None, False), "mpt": (None, False), "llama-bpe": (LLAMA3_PATTERN, True), "qwen2": (QWEN2_PATTERN, False),
    "qwen35": (QWEN35_PATTERN, False), "starcoder": ("digits", False), "refact": ("digits", False),
    "command-r": ("digits", False),
}

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3_CHAT = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
               " + message['content'] + '<|eot_id|>' }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

# Per family: llama.cpp's architecture, whether it interleaves q/k rows, q/k/v biases, q/k norms, and
# the tokenizer as the family publishes it: split pattern (None: ByteLevel's own GPT-2 regex), llama.cpp's
# pre-tokenizer name for it, ignore_merges, special tokens, which ones are bos and eos, the template.
FAMILIES = {
    "llama": dict(arch="llama", permute=True, bias=False, qk_norm=False, pattern=LLAMA3_PATTERN, pre="llama-bpe",
                  ignore_merges=True, specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                                "<|end_header_id|>", "<|eot_id|>"],
                  bos="<|begin_of_text|>", eos="<|eot_id|>", template=LLAMA3_CHAT),
    # Mistral's tokenizer is SentencePiece's BPE exported to tokenizer.json (byte fallback, U+2581 spaces).
    "mistral": dict(arch="llama", permute=True, bias=False, qk_norm=False, pattern="sentencepiece", pre=None,
                    ignore_merges=False, specials=["[INST]", "[/INST]"], bos="<s>", eos="</s>", template=None),
    "qwen2": dict(arch="qwen2", permute=False, bias=True, qk_norm=False, pattern=QWEN2_PATTERN, pre="qwen2",
                  ignore_merges=False, specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None,
                  eos="<|im_end|>", template=CHATML),
    "qwen3": dict(arch="qwen3", permute=False, bias=False, qk_norm=True, pattern=QWEN2_PATTERN, pre="qwen2",
                  ignore_merges=False, specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None,
                  eos="<|im_end|>", template=CHATML),
    "qwen2_moe": dict(arch="qwen2moe", permute=False, bias=True, qk_norm=False, pattern=QWEN2_PATTERN, pre="qwen2",
                      ignore_merges=False, specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None,
                      eos="<|im_end|>", template=CHATML, experts=True, shared_expert=True),
    "qwen3_moe": dict(arch="qwen3moe", permute=False, bias=False, qk_norm=True, pattern=QWEN2_PATTERN, pre="qwen2",
                      ignore_merges=False, specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None,
                      eos="<|im_end|>", template=CHATML, experts=True),
    # Gemma: SentencePiece-style without a space prefix; norms stored as w for a scale of 1 + w.
    "gemma2": dict(arch="gemma2", permute=False, bias=False, qk_norm=False, pattern="sentencepiece", pre=None,
                   ignore_merges=False, spm_fixed=["<pad>", "<eos>", "<bos>", "<unk>"], space_prefix=False,
                   specials=["<start_of_turn>", "<end_of_turn>"], bos="<bos>", eos="<eos>", template=None, gemma=True),
    "gemma3_text": dict(arch="gemma3", permute=False, bias=False, qk_norm=True, pattern="sentencepiece", pre=None,
                        ignore_merges=False, spm_fixed=["<pad>", "<eos>", "<bos>", "<unk>"], space_prefix=False,
                        specials=["<start_of_turn>", "<end_of_turn>"], bos="<bos>", eos="<eos>", template=None,
                        gemma=True),
    # Phi-3: fused q/k/v and gate/up rows, LongRoPE factors, a SentencePiece-style tokenizer.
    "phi3": dict(arch="phi3", permute=False, bias=False, qk_norm=False, pattern="sentencepiece", pre=None,
                 ignore_merges=False, specials=["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>"], bos="<s>",
                 eos="<|end|>", template=None),
    "olmo2": dict(arch="olmo2", permute=False, bias=False, qk_norm="full", pattern=None, pre="gpt-2",
                  ignore_merges=False, specials=["<|endoftext|>", "<|pad|>"], bos=None, eos="<|endoftext|>",
                  template=None),
    "smollm3": dict(arch="smollm3", permute=True, bias=False, qk_norm=False, pattern=LLAMA3_PATTERN,
                    pre="llama-bpe", ignore_merges=True, specials=["<|begin_of_text|>", "<|im_start|>", "<|im_end|>"],
                    bos=None, eos="<|im_end|>", template=CHATML),
    # Granite's tokenizer splits digits one by one before GPT-2's regex: llama.cpp's "starcoder".
    "granite": dict(arch="granite", permute=True, bias=False, qk_norm=False, pattern="digits", pre="starcoder",
                    ignore_merges=False, specials=["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"],
                    bos="<|end_of_text|>", eos="<|end_of_text|>", template=None),
}
# Gemma 4 (hf_gemma4.py): SentencePiece-style pieces split only at newline runs, written to GGUF as
# llama.cpp's "gemma4" model (pieces and merges); its chat markers as tokens; norms as w, not 1 + w.
FAMILIES["gemma4_text"] = dict(arch="gemma4", permute=False, bias=False, qk_norm=True, pattern="sentencepiece", pre=None,
                               ignore_merges=False, spm_fixed=["<pad>", "<eos>", "<bos>", "<unk>"], space_prefix=False,
                               newline_split=True, specials=["<|turn>", "<turn|>", "<|channel>", "<channel|>"], bos="<bos>",
                               eos="<eos>", template=None, gemma4=True)
# gpt-oss: biased attention with a sink per head, a biased router, experts published stacked in MXFP4
# with gate and up rows interleaved; yarn rope; alternating sliding and full layers.
FAMILIES["gpt_oss"] = dict(arch="gpt-oss", permute=False, bias=True, qk_norm=False, pattern=QWEN2_PATTERN, pre="qwen2",
                           ignore_merges=False, specials=["<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|return|>"],
                           bos=None, eos="<|return|>", template=None, gpt_oss=True)
# Qwen 3.5: Gated DeltaNet layers between gated attention layers (hf_qwen35.py); its own split pattern.
FAMILIES["qwen3_5_text"] = dict(arch="qwen35", permute=False, bias=False, qk_norm=True, pattern=QWEN35_PATTERN, pre="qwen35",
                                ignore_merges=False, specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None,
                                eos="<|im_end|>", template=CHATML, qwen35="dense")
FAMILIES["qwen3_5_moe_text"] = dict(FAMILIES["qwen3_5_text"], arch="qwen35moe", qwen35="moe", experts=True)
FAMILIES["qwen3_next"] = dict(FAMILIES["qwen3_5_text"], arch="qwen3next", qwen35="next", experts=True)
GPT_OSS_ROPE = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 128,
                "truncate": False}
# E2M1's values, the code's index (bit 3: the sign), as MXFP4 defines them.
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)

# Llama 3.1's rope scaling; the converter turns it into a rope_freqs tensor.
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}


def llama3_rope_freqs(base, dim, rope):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors, in float32 as torch computes it there."""
    f32 = np.float32
    freqs = f32(1.0) / np.power(f32(base), np.arange(0, dim, 2, dtype=f32) / f32(dim))
    old, low, high, factor = rope["original_max_position_embeddings"], rope["low_freq_factor"], rope["high_freq_factor"], rope["factor"]
    out = []
    for freq in freqs:
        wavelen = f32(2 * np.pi) / freq
        if wavelen < f32(old / high):
            out.append(f32(1))
        elif wavelen > f32(old / low):
            out.append(f32(factor))
        else:
            smooth = (f32(old) / wavelen - f32(low)) / f32(high - low)
            out.append(f32(1) / ((f32(1) - smooth) / f32(factor) + smooth))
    return np.array(out, dtype=f32)


# Phi-3's LongRoPE (one factor per rotary pair) over a context four times the original.
PHI3_ORIGINAL_CONTEXT = 512


def phi3_rope_scaling(head_dim):
    pairs = np.arange(head_dim // 2)
    return {"type": "longrope", "long_factor": [float(1.0 + 0.25 * i) for i in pairs],
            "short_factor": [float(1.0 + 0.01 * i) for i in pairs]}


GRANITE_MULTIPLIERS = {"attention_multiplier": 0.0625, "embedding_multiplier": 12.0, "residual_multiplier": 0.22,
                       "logits_scaling": 8.0}

CORPUS = [
    "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, there lived "
    "an old fisherman and his wife. They'll say it's the best story you've ever heard, and I'm sure they're right.",
    "def add(a, b):\n    return a + b\n\nprint(add(1, 22), add(333, 4444))\n",
    "Café déjà vu: naïve résumés, 42 times. Grüße aus München! Привет, мир. 你好，世界。こんにちは。",
    "Numbers 1234567890 and 3.14159, dates 2026-12-06, prices $19.99 and 20%!!!",
]


SPACE = "\u2581"


def train_sentencepiece_style(f, vocab_size, texts):
    """A SentencePiece BPE vocabulary as Hugging Face exports it: <unk>, <s>, </s>, the 256 byte tokens,
    then the pieces best first; merges are every split of every piece into two pieces, in the order of
    the pieces' scores (transformers' SentencePieceExtractor), so merging by rank is SentencePiece's
    merging by score. Returns the tokenizer and each piece's score (minus its rank among the pieces)."""
    from tokenizers import AddedToken, normalizers, processors
    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first")
    learner.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False))
    learnt = [p for p, _ in sorted(learner.get_vocab().items(), key=lambda kv: kv[1])]
    fixed = f.get("spm_fixed", ["<unk>", "<s>", "</s>"]) + [f"<0x{b:02X}>" for b in range(256)]
    pieces = fixed + learnt[:vocab_size - len(fixed) - len(f["specials"])]
    vocab = {p: i for i, p in enumerate(pieces)}
    merges = []
    for piece in pieces[len(fixed):]:
        splits = [(piece[:i], piece[i:]) for i in range(1, len(piece)) if piece[:i] in vocab and piece[i:] in vocab]
        merges += sorted(splits, key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if f.get("space_prefix", True):
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    elif f.get("newline_split"):  # Gemma 4: no prefix, runs of newlines split from the rest
        tok.normalizer = normalizers.Replace(" ", SPACE)
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\n]+|[\n]+"), behavior="isolated")
    else:  # Gemma: no prefix; its Split on spaces finds none once they are replaced
        tok.normalizer = normalizers.Replace(" ", SPACE)
        tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in f.get("spm_fixed", ["<unk>", "<s>", "</s>"]) + f["specials"]])
    tok.post_processor = processors.TemplateProcessing(single=f"{f['bos']} $A", pair=f"{f['bos']} $A {f['bos']} $B",
                                                       special_tokens=[(f["bos"], vocab[f["bos"]])])
    return tok


def byte_level_pre_tokenizer(pattern):
    if pattern is None:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pattern == "digits":
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def tokenizer_from_gguf(path):
    """A real vocabulary (one of llama.cpp's vocab suites) as its model publishes tokenizer.json: a
    byte-level BPE with the published pre-tokenizer, SentencePiece's BPE exported as transformers'
    converter exports it (merges from the pieces and their scores), Gemma 4's SentencePiece-style BPE
    with its merges, or SentencePiece's unigram model as XLM-RoBERTa publishes it (Precompiled character
    map, spaces collapsed, Metaspace). Returns the tokenizer, its model ("gpt2", "llama", "gemma4" or
    "t5") and its bos and eos tokens."""
    import gguf
    from tokenizers import AddedToken, normalizers, processors
    fields = gguf.GGUFReader(path).fields

    def strings(key):
        f = fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key):
        f = fields.get(key)
        return None if f is None else f.parts[f.data[0]][0]

    kind = bytes(fields["tokenizer.ggml.model"].parts[fields["tokenizer.ggml.model"].data[0]]).decode()
    tokens = strings("tokenizer.ggml.tokens")
    types = [int(fields["tokenizer.ggml.token_type"].parts[i][0]) for i in fields["tokenizer.ggml.token_type"].data]
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    if kind == "gemma4":  # SentencePiece-style pieces with their merges, split at newline runs (Gemma 4)
        merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.normalizer = normalizers.Replace(" ", SPACE)
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\n]+|[\n]+"), behavior="isolated")
        tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    elif kind == "t5":  # SentencePiece's unigram model as XLM-RoBERTa's tokenizer.json publishes it
        scores = [float(fields["tokenizer.ggml.scores"].parts[i][0]) for i in fields["tokenizer.ggml.scores"].data]
        charsmap = fields["tokenizer.ggml.precompiled_charsmap"]
        charsmap = bytes(np.concatenate([np.asarray(charsmap.parts[i]) for i in charsmap.data]).astype(np.uint8))
        tok = Tokenizer(models.Unigram(list(zip(tokens, scores)), unk_id=types.index(2), byte_fallback=False))
        tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always")
        bos, eos = tokens[int(scalar("tokenizer.ggml.bos_token_id"))], tokens[int(scalar("tokenizer.ggml.eos_token_id"))]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
            special_tokens=[(bos, int(scalar("tokenizer.ggml.bos_token_id"))), (eos, int(scalar("tokenizer.ggml.eos_token_id")))])
    elif kind == "gpt2":
        pre = bytes(fields["tokenizer.ggml.pre"].parts[fields["tokenizer.ggml.pre"].data[0]]).decode()
        pattern, ignore_merges = PUBLISHED_PRE_TOKENIZERS[pre]
        merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
        tok.pre_tokenizer = byte_level_pre_tokenizer(pattern)
        tok.decoder = decoders.ByteLevel()
    else:
        scores = [float(fields["tokenizer.ggml.scores"].parts[i][0]) for i in fields["tokenizer.ggml.scores"].data]
        by_score = sorted((i for i, t in enumerate(types) if t == 1), key=lambda i: -scores[i])
        merges = []
        for i in by_score:
            piece = tokens[i]
            splits = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
            merges += sorted(splits, key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        unk = tokens[types.index(2)]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, byte_fallback=True, fuse_unk=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types) if k == 3])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, types) if k == 4])
    bos, eos = scalar("tokenizer.ggml.bos_token_id"), scalar("tokenizer.ggml.eos_token_id")
    return tok, kind, (tokens[bos] if bos is not None else None), (tokens[eos] if eos is not None else None)


def train_tokenizer(family, vocab_size):
    f = FAMILIES[family]
    english = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                "perplexity_english.txt"), encoding="utf-8").read()
    if f["pattern"] == "sentencepiece":
        return train_sentencepiece_style(f, vocab_size, CORPUS * 20 + [english])
    tok = Tokenizer(models.BPE(ignore_merges=f["ignore_merges"]))
    tok.pre_tokenizer = byte_level_pre_tokenizer(f["pattern"])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(f["specials"]), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 20 + [english], trainer)
    tok.add_special_tokens(f["specials"])  # after the learnt pieces, as published vocabularies have them
    if f["bos"] is not None:
        from tokenizers import processors
        tok.post_processor = processors.TemplateProcessing(
            single=f"{f['bos']} $A", pair=f"{f['bos']} $A {f['bos']} $B",
            special_tokens=[(f["bos"], tok.token_to_id(f["bos"]))])
    return tok


def interleave_rope_halves(w, n_heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two halves become interleaved pairs."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make_weights(family, shape, rng):
    f = FAMILIES[family]
    dim, n_heads, n_kv, head_dim, ff, vocab = (shape[k] for k in ("dim", "heads", "kv_heads", "head_dim", "ff", "vocab"))

    def w(*s, scale=None):
        return (rng.standard_normal(s) * (scale or 1.0 / np.sqrt(s[-1]))).astype(np.float32)

    if f.get("qwen35"):
        return hf_qwen35.weights(shape, w, f["qwen35"])
    if f.get("gemma4"):
        return hf_gemma4.weights(shape, w)
    # Gemma scales its (tied) embeddings by sqrt(dim): smaller ones keep its logits from saturating.
    t = {"model.embed_tokens.weight": w(vocab, dim, scale=0.05 if f.get("gemma") else 0.5),
         "model.norm.weight": 1.0 + 0.1 * w(dim, scale=1.0)}
    if not shape["tied"]:
        t["lm_head.weight"] = w(vocab, dim)
    for il in range(shape["layers"]):
        p = f"model.layers.{il}."
        if family == "olmo2":  # norms after attention and after the FFN, none before
            t[p + "post_feedforward_layernorm.weight"] = 1.0 + 0.1 * w(dim, scale=1.0)
        elif f.get("gemma"):  # norms before and after both; stored as w, scaling by 1 + w
            t[p + "input_layernorm.weight"] = 0.1 * w(dim, scale=1.0)
            t[p + "pre_feedforward_layernorm.weight"] = 0.1 * w(dim, scale=1.0)
            t[p + "post_feedforward_layernorm.weight"] = 0.1 * w(dim, scale=1.0)
        else:
            t[p + "input_layernorm.weight"] = 1.0 + 0.1 * w(dim, scale=1.0)
        t[p + "post_attention_layernorm.weight"] = (0.0 if f.get("gemma") else 1.0) + 0.1 * w(dim, scale=1.0)
        t[p + "self_attn.q_proj.weight"] = w(n_heads * head_dim, dim)
        t[p + "self_attn.k_proj.weight"] = w(n_kv * head_dim, dim)
        t[p + "self_attn.v_proj.weight"] = w(n_kv * head_dim, dim)
        t[p + "self_attn.o_proj.weight"] = w(dim, n_heads * head_dim)
        if f["bias"]:
            t[p + "self_attn.q_proj.bias"] = w(n_heads * head_dim, scale=0.1)
            t[p + "self_attn.k_proj.bias"] = w(n_kv * head_dim, scale=0.1)
            t[p + "self_attn.v_proj.bias"] = w(n_kv * head_dim, scale=0.1)
        if f["qk_norm"]:  # per head (qwen3) or over all heads at once (olmo2)
            q_size, k_size = (n_heads * head_dim, n_kv * head_dim) if f["qk_norm"] == "full" else (head_dim, head_dim)
            t[p + "self_attn.q_norm.weight"] = 1.0 + 0.1 * w(q_size, scale=1.0)
            t[p + "self_attn.k_norm.weight"] = 1.0 + 0.1 * w(k_size, scale=1.0)
        if f.get("gpt_oss"):  # experts stacked, gate and up rows interleaved (even gate, odd up)
            n_exp, eff = shape["experts"], shape["expert_ff"]
            t[p + "self_attn.o_proj.bias"] = w(dim, scale=0.1)
            t[p + "self_attn.sinks"] = w(n_heads, scale=1.0)
            t[p + "mlp.router.weight"] = w(n_exp, dim, scale=0.5)
            t[p + "mlp.router.bias"] = w(n_exp, scale=0.5)
            t[p + "mlp.experts.gate_up_proj"] = w(n_exp, 2 * eff, dim)
            t[p + "mlp.experts.gate_up_proj_bias"] = w(n_exp, 2 * eff, scale=0.1)
            t[p + "mlp.experts.down_proj"] = w(n_exp, dim, eff)
            t[p + "mlp.experts.down_proj_bias"] = w(n_exp, dim, scale=0.05)
        elif f.get("experts"):  # one matrix per expert, as transformers 4 saves them
            n_exp, eff = shape["experts"], shape["expert_ff"]
            t[p + "mlp.gate.weight"] = w(n_exp, dim, scale=0.5)
            for e in range(n_exp):
                t[p + f"mlp.experts.{e}.gate_proj.weight"] = w(eff, dim)
                t[p + f"mlp.experts.{e}.up_proj.weight"] = w(eff, dim)
                t[p + f"mlp.experts.{e}.down_proj.weight"] = w(dim, eff)
            if f.get("shared_expert"):
                t[p + "mlp.shared_expert_gate.weight"] = w(1, dim)
                t[p + "mlp.shared_expert.gate_proj.weight"] = w(ff, dim)
                t[p + "mlp.shared_expert.up_proj.weight"] = w(ff, dim)
                t[p + "mlp.shared_expert.down_proj.weight"] = w(dim, ff)
        else:
            t[p + "mlp.gate_proj.weight"] = w(ff, dim)
            t[p + "mlp.up_proj.weight"] = w(ff, dim)
            t[p + "mlp.down_proj.weight"] = w(dim, ff)
    if family == "phi3":  # fused, as Phi-3 publishes them
        for il in range(shape["layers"]):
            p = f"model.layers.{il}."
            t[p + "self_attn.qkv_proj.weight"] = np.concatenate(
                [t.pop(p + f"self_attn.{m}_proj.weight") for m in ("q", "k", "v")])
            t[p + "mlp.gate_up_proj.weight"] = np.concatenate([t.pop(p + f"mlp.{m}_proj.weight") for m in ("gate", "up")])
    return t


def stored(array, dtype):
    """The array as the checkpoint stores it (BF16 as the upper halves of F32, rounded to nearest even);
    bytes (MXFP4 codes and exponents) as they are."""
    if array.dtype == np.uint8:
        return array
    if dtype == "F16":
        return array.astype(np.float16)
    if dtype == "F32":
        return array.astype(np.float32)
    bits = array.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def save(out, file, tensors, dtype):
    """safetensors' numpy writer; numpy has no bfloat16, so BF16 is written as U16 and the header's
    dtype renamed (the bytes are the same)."""
    path = os.path.join(out, file)
    save_file({n: stored(a, dtype) for n, a in tensors.items()}, path, metadata={"format": "pt"})
    if dtype != "BF16":
        return
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for name, entry in header.items():
        if name != "__metadata__" and entry["dtype"] == "U16":
            entry["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(len(text).to_bytes(8, "little") + text + raw[8 + n:])


def mxfp4_codes(w):
    """w [..., n] (n a multiple of 32) as MXFP4: codes [..., n] (0-15) and E8M0 exponents [..., n / 32],
    round to nearest, each block's exponent the smallest that keeps its largest value within 6."""
    blocks = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32).astype(np.float32)
    amax = np.maximum(np.abs(blocks).max(axis=-1), 1e-30)
    e = np.clip(np.ceil(np.log2(amax / 6.0)), -127, 127).astype(np.int32)
    v = blocks / np.exp2(e)[..., None].astype(np.float32)
    index = np.abs(np.abs(v)[..., None] - FP4_VALUES).argmin(axis=-1)
    codes = (index | np.where(v < 0, 8, 0)).astype(np.uint8)
    return codes.reshape(w.shape), (e + 127).astype(np.uint8)


def mxfp4_published(w):
    """OpenAI's layout: _blocks [..., n / 32, 16], two codes a byte, the even element in the low nibble."""
    codes, scales = mxfp4_codes(w)
    c = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 32, 16, 2)
    return (c[..., 0] | (c[..., 1] << 4)).astype(np.uint8), scales


def mxfp4_ggml(w):
    """ggml's MXFP4 as the converter repacks it: per block the exponent, then element j in the low and
    j + 16 in the high nibble of byte j: [..., n / 32 * 17] bytes."""
    codes, scales = mxfp4_codes(w)
    c = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 32, 32)
    qs = (c[..., :16] | (c[..., 16:] << 4)).astype(np.uint8)
    out = np.concatenate([scales[..., None], qs], axis=-1)
    return out.reshape(*out.shape[:-2], out.shape[-2] * 17)


def gpt_oss_published(tensors, shape):
    """gpt-oss's experts as OpenAI published them: MXFP4 _blocks and _scales, biases as they are; or, as
    its dequantized (BF16) releases store them, each matrix transposed: [experts, columns, rows]."""
    t = dict(tensors)
    for il in range(shape["layers"]):
        for m in ("gate_up_proj", "down_proj"):
            name = f"model.layers.{il}.mlp.experts.{m}"
            if shape["mxfp4"]:
                t[name + "_blocks"], t[name + "_scales"] = mxfp4_published(t.pop(name))
            else:
                t[name] = np.ascontiguousarray(t[name].swapaxes(1, 2))
    return t


def fuse_experts(tensors, shape):
    """transformers 5's layout: each layer's experts saved stacked, gate and up rows in one tensor."""
    t = dict(tensors)
    for il in range(shape["layers"]):
        p = f"model.layers.{il}.mlp.experts."
        gate_up, down = [], []
        for e in range(shape["experts"]):
            gate_up.append(np.concatenate([t.pop(f"{p}{e}.gate_proj.weight"), t.pop(f"{p}{e}.up_proj.weight")]))
            down.append(t.pop(f"{p}{e}.down_proj.weight"))
        t[p + "gate_up_proj"] = np.stack(gate_up)
        t[p + "down_proj"] = np.stack(down)
    return t


def gemma3_wrapped(text_config, tensors, layout):
    """Gemma3ForConditionalGeneration: the text model's config as text_config, without the keys equal to
    Gemma3TextConfig's defaults (as transformers saves it), a vision config and a few vision tensors,
    and the text model's tensors under language_model.model. (layout "old") or model.language_model.
    (transformers 4.52 on, "new")."""
    defaults = {"rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "hidden_activation": "gelu_pytorch_tanh",
                "final_logit_softcapping": None, "attn_logit_softcapping": None, "rope_scaling": None}
    text = {k: v for k, v in text_config.items() if not (k in defaults and defaults[k] == v) and k not in ("architectures", "torch_dtype")}
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
              "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "image_size": 56, "patch_size": 14,
                                "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64},
              "image_token_index": text_config["vocab_size"] - 1, "mm_tokens_per_image": 16,
              "torch_dtype": text_config["torch_dtype"], "eos_token_id": text_config["eos_token_id"]}
    renamed = {}
    for name, array in tensors.items():
        if layout == "old":
            renamed["language_model." + name] = array
        else:
            renamed["model.language_model." + name[len("model."):] if name.startswith("model.") else name] = array
    vision = "vision_tower." if layout == "old" else "model.vision_tower."
    renamed[vision + "vision_model.embeddings.patch_embedding.weight"] = np.full((32, 3, 14, 14), 0.01, dtype=np.float32)
    renamed[("multi_modal_projector." if layout == "old" else "model.multi_modal_projector.") + "mm_input_projection_weight"] = \
        np.full((32, text_config["hidden_size"]), 0.01, dtype=np.float32)
    return config, renamed


def write_folder(out, family, shape, tensors, tok, dtype, shards):
    f = FAMILIES[family]
    os.makedirs(out, exist_ok=True)
    config = {
        "architectures": [{"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM", "olmo2": "Olmo2ForCausalLM", "smollm3": "SmolLM3ForCausalLM",
                           "granite": "GraniteForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
                           "qwen3_moe": "Qwen3MoeForCausalLM", "gemma2": "Gemma2ForCausalLM", "qwen3_5_text": "Qwen3_5ForCausalLM",
                           "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM", "qwen3_next": "Qwen3NextForCausalLM",
                           "gemma3_text": "Gemma3ForCausalLM", "gemma4_text": "Gemma4ForCausalLM", "phi3": "Phi3ForCausalLM", "gpt_oss": "GptOssForCausalLM"}[family]],
        "model_type": family, "hidden_size": shape["dim"], "intermediate_size": shape["ff"],
        "num_hidden_layers": shape["layers"], "num_attention_heads": shape["heads"],
        "num_key_value_heads": shape["kv_heads"], "head_dim": shape["head_dim"], "hidden_act": "silu",
        "max_position_embeddings": shape["ctx"], "rms_norm_eps": 1e-6, "rope_theta": shape["rope_theta"],
        "rope_scaling": None, "tie_word_embeddings": shape["tied"], "vocab_size": shape["vocab"],
        "torch_dtype": {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}[dtype],
        "bos_token_id": tok.token_to_id(f["bos"]) if f["bos"] else None, "eos_token_id": tok.token_to_id(f["eos"]),
    }
    if family == "qwen2":
        config["use_sliding_window"] = False
    if f.get("experts"):
        config.update(num_experts=shape["experts"], num_experts_per_tok=2, moe_intermediate_size=shape["expert_ff"],
                      norm_topk_prob=family == "qwen3_moe", decoder_sparse_step=1, mlp_only_layers=[])
    if f.get("shared_expert"):
        config["shared_expert_intermediate_size"] = shape["ff"]
    if f.get("gemma"):
        config.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=shape["head_dim"],
                      sliding_window=shape["window"], tie_word_embeddings=True,
                      layer_types=[("sliding_attention" if ((il + 1) % 6 != 0 if family == "gemma3_text" else il % 2 == 0)
                                    else "full_attention") for il in range(shape["layers"])])
        del config["hidden_act"]
        if family == "gemma2":
            config.update(attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
        else:
            config.update(rope_local_base_freq=10000.0, final_logit_softcapping=None, attn_logit_softcapping=None)
    if family == "llama":
        config["rope_scaling"] = LLAMA3_ROPE
    if f.get("gpt_oss"):
        config.update(num_local_experts=shape["experts"], num_experts_per_tok=2, experts_per_token=2, attention_bias=True,
                      sliding_window=shape["window"], rope_scaling=GPT_OSS_ROPE, swiglu_limit=7.0,
                      layer_types=["sliding_attention" if il % 2 == 0 else "full_attention" for il in range(shape["layers"])],
                      quantization_config={"quant_method": "mxfp4", "modules_to_not_convert": [
                          "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]})
        if not shape["mxfp4"]:
            del config["quantization_config"]
    if family == "phi3":
        config.update(rope_scaling=phi3_rope_scaling(shape["head_dim"]), original_max_position_embeddings=PHI3_ORIGINAL_CONTEXT,
                      sliding_window=shape["ctx"] - 1)
        del config["head_dim"]
    if family == "smollm3":
        config["no_rope_layers"] = [int((il + 1) % 4 != 0) for il in range(shape["layers"])]
    if family == "granite":
        config.update(GRANITE_MULTIPLIERS)
        del config["head_dim"]  # Granite's configs have none (dim / heads)
    if f.get("qwen35"):
        config = hf_qwen35.config(shape, config, f["qwen35"])
    if f.get("gemma4"):
        config = hf_gemma4.config(shape, config)
    if shape.get("wrapped"):
        if f.get("qwen35"):
            config, tensors = hf_qwen35.wrapped(config, tensors, f["qwen35"])
        elif f.get("gemma4"):
            config, tensors = hf_gemma4.wrapped(config, tensors)
        else:
            config, tensors = gemma3_wrapped(config, tensors, shape["wrapped"])
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"eos_token_id": config["eos_token_id"], "do_sample": True, "temperature": 0.7, "top_p": 0.8},
              open(os.path.join(out, "generation_config.json"), "w"), indent=2)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok_config = {"eos_token": f["eos"], "bos_token": f["bos"], "model_max_length": shape["ctx"],
                  "tokenizer_class": "PreTrainedTokenizerFast"}
    if f["template"]:
        tok_config["chat_template"] = f["template"]
    json.dump(tok_config, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=2)

    names = list(tensors)
    if shards == 1:
        save(out, "model.safetensors", {n: tensors[n] for n in names}, dtype)
        return
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save(out, file, {n: tensors[n] for n in part}, dtype)
        weight_map.update({n: file for n in part})
    json.dump({"metadata": {}, "weight_map": weight_map},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)


def write_gguf(path, family, shape, tensors, tok, dtype):
    import gguf
    f = FAMILIES[family]
    arch = f["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(path))
    w.add_context_length(shape["ctx"])
    w.add_embedding_length(shape["dim"])
    w.add_block_count(shape["layers"])
    w.add_head_count(shape["heads"])
    if f.get("gemma4"):
        hf_gemma4.write_gguf_keys(w, arch, shape)
    else:
        w.add_feed_forward_length(shape["ff"])
        w.add_head_count_kv(shape["kv_heads"])
        w.add_key_length(shape["head_dim"])
        w.add_value_length(shape["head_dim"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(shape["rope_theta"])
    w.add_vocab_size(shape["vocab"])
    vocab = tok.get_vocab(with_added_tokens=True)
    pieces = [None] * shape["vocab"]
    for piece, i in vocab.items():
        pieces[i] = piece
    specials = set(f["specials"])
    if f.get("gemma4"):
        # Gemma4Model.set_vocab: the pieces and merges as tokenizer.json has them, byte tokens, the
        # channel markers user-defined (rendered), no space prefix.
        specials |= set(f["spm_fixed"]) - {"<unk>"}
        visible = {"<|channel>", "<channel|>"}
        w.add_tokenizer_model("gemma4")
        w.add_token_list(pieces)
        w.add_token_types([4 if p in visible else 2 if p == "<unk>" else 3 if p in specials else 6 if p.startswith("<0x") else 1
                           for p in pieces])
        w.add_token_merges([" ".join(m) for m in json.loads(tok.to_str())["model"]["merges"]])
        w.add_add_space_prefix(False)
    elif f["pattern"] == "sentencepiece":
        # As the converter writes a tokenizer.model: SentencePiece's scores (here minus the piece's rank),
        # byte tokens, <unk>, the control tokens, and the space prefix.
        specials |= set(f.get("spm_fixed", ["<unk>", "<s>", "</s>"])) - {"<unk>"}
        w.add_tokenizer_model("llama")
        w.add_token_list(pieces)
        w.add_token_scores([-float(i) for i in range(len(pieces))])
        w.add_token_types([2 if p == "<unk>" else 3 if p in specials else 6 if p.startswith("<0x") else 1 for p in pieces])
        w.add_add_space_prefix(f.get("space_prefix", True))
        w.add_unk_token_id(pieces.index("<unk>"))
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(f["pre"])
        w.add_token_list(pieces)
        w.add_token_types([3 if p in specials else 1 for p in pieces])
        w.add_token_merges([" ".join(m) for m in json.loads(tok.to_str())["model"]["merges"]])
    if f["bos"]:
        w.add_bos_token_id(tok.token_to_id(f["bos"]))
    w.add_eos_token_id(tok.token_to_id(f["eos"]))
    w.add_add_bos_token(f["bos"] is not None)
    if f["template"]:
        w.add_chat_template(f["template"])
    if family == "phi3":
        rope = phi3_rope_scaling(shape["head_dim"])
        scale = shape["ctx"] / PHI3_ORIGINAL_CONTEXT
        w.add_rope_dimension_count(shape["head_dim"])
        w.add_rope_scaling_orig_ctx_len(PHI3_ORIGINAL_CONTEXT)
        w.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(scale) / np.log(PHI3_ORIGINAL_CONTEXT))))
        w.add_sliding_window(shape["ctx"] - 1)
        w.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], dtype=np.float32))
    if family == "llama":
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(shape["rope_theta"], shape["head_dim"], LLAMA3_ROPE))
    if f.get("gemma"):
        w.add_sliding_window(shape["window"])
        if family == "gemma2":
            w.add_attn_logit_softcapping(50.0)
            w.add_final_logit_softcapping(30.0)
    if f.get("gpt_oss"):  # the converter's GptOssModel: experts repacked to ggml's MXFP4, gate/up split
        w.add_expert_count(shape["experts"])
        w.add_expert_used_count(2)
        w.add_expert_feed_forward_length(shape["expert_ff"])
        w.add_sliding_window(shape["window"])
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(GPT_OSS_ROPE["factor"])
        w.add_rope_scaling_orig_ctx_len(GPT_OSS_ROPE["original_max_position_embeddings"])
        w.add_float32(f"{arch}.rope.scaling.yarn_beta_fast", GPT_OSS_ROPE["beta_fast"])  # llama.cpp's keys; older
        w.add_float32(f"{arch}.rope.scaling.yarn_beta_slow", GPT_OSS_ROPE["beta_slow"])  # gguf-py has no method
        tensors = dict(tensors)
        mxfp4 = gguf.GGMLQuantizationType.MXFP4 if shape["mxfp4"] else None
        for il in range(shape["layers"]):
            p, b = f"model.layers.{il}.mlp.experts.", f"blk.{il}."
            gate_up, gate_up_bias = tensors.pop(p + "gate_up_proj"), tensors.pop(p + "gate_up_proj_bias")
            for gname, matrix in (("ffn_gate_exps", gate_up[:, ::2]), ("ffn_up_exps", gate_up[:, 1::2]),
                                  ("ffn_down_exps", tensors.pop(p + "down_proj"))):
                if shape["mxfp4"]:
                    w.add_tensor(b + gname + ".weight", mxfp4_ggml(matrix), raw_dtype=mxfp4)
                elif dtype == "BF16":
                    w.add_tensor(b + gname + ".weight", stored(np.ascontiguousarray(matrix), dtype), raw_dtype=gguf.GGMLQuantizationType.BF16)
                else:
                    w.add_tensor(b + gname + ".weight", stored(np.ascontiguousarray(matrix), dtype))
            w.add_tensor(b + "ffn_gate_exps.bias", stored_as_f32(gate_up_bias[:, ::2], dtype))
            w.add_tensor(b + "ffn_up_exps.bias", stored_as_f32(gate_up_bias[:, 1::2], dtype))
            w.add_tensor(b + "ffn_down_exps.bias", stored_as_f32(tensors.pop(p + "down_proj_bias"), dtype))
    if f.get("experts"):
        w.add_expert_count(shape["experts"])
        w.add_expert_used_count(2)
        w.add_expert_feed_forward_length(shape["expert_ff"])
    if f.get("shared_expert"):
        w.add_expert_shared_feed_forward_length(shape["ff"])
    if family == "granite":
        w.add_attention_scale(GRANITE_MULTIPLIERS["attention_multiplier"])
        w.add_embedding_scale(GRANITE_MULTIPLIERS["embedding_multiplier"])
        w.add_residual_scale(GRANITE_MULTIPLIERS["residual_multiplier"])
        w.add_logit_scale(GRANITE_MULTIPLIERS["logits_scaling"])

    if f.get("gemma4"):
        w.add_tensor("rope_freqs.weight", hf_gemma4.rope_freqs())
        for gname, array, kind in hf_gemma4.gguf_tensors(tensors, dtype):
            if kind == "F32":
                w.add_tensor(gname, stored_as_f32(array, dtype))
            elif dtype == "BF16":
                w.add_tensor(gname, stored(array, dtype), raw_dtype=gguf.GGMLQuantizationType.BF16)
            else:
                w.add_tensor(gname, stored(array, dtype))
        tensors = {}
    if f.get("qwen35"):
        hf_qwen35.write_gguf_keys(w, arch, shape, f["qwen35"])
        for gname, array, kind in hf_qwen35.gguf_tensors(tensors, lambda a: stored(a, dtype), lambda a: stored_as_f32(a, dtype),
                                                         lambda a: plus_one(a, dtype), dtype, f["qwen35"], shape["experts"]):
            if kind == "F32":
                w.add_tensor(gname, np.ascontiguousarray(array, dtype=np.float32))
            elif kind == "BF16":
                w.add_tensor(gname, stored(np.ascontiguousarray(array), dtype), raw_dtype=gguf.GGMLQuantizationType.BF16)
            else:
                w.add_tensor(gname, stored(np.ascontiguousarray(array), dtype))
        tensors = {}
    gguf_names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                  "lm_head.weight": "output.weight"}
    layer_names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                   "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
                   "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                   "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                   "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                   "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                   "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight": "attn_q_norm.weight",
                   "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
                   "mlp.gate.weight": "ffn_gate_inp.weight", "self_attn.qkv_proj.weight": "attn_qkv.weight",
                   "mlp.gate_up_proj.weight": "ffn_up.weight", "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
                   "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
                   "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
                   "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
                   "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
                   "self_attn.o_proj.bias": "attn_output.bias", "self_attn.sinks": "attn_sinks.weight",
                   "mlp.router.weight": "ffn_gate_inp.weight", "mlp.router.bias": "ffn_gate_inp.bias"}
    tensors = dict(tensors)
    if f.get("experts") and tensors:  # the converter stacks the experts into one tensor per layer and matrix
        for il in range(shape["layers"]):
            for m in ("gate_proj", "up_proj", "down_proj"):
                names = [f"model.layers.{il}.mlp.experts.{e}.{m}.weight" for e in range(shape["experts"])]
                tensors[f"model.layers.{il}.mlp.experts.{m}"] = np.stack([tensors.pop(n) for n in names])
        layer_names.update({"mlp.experts.gate_proj": "ffn_gate_exps.weight", "mlp.experts.up_proj": "ffn_up_exps.weight",
                            "mlp.experts.down_proj": "ffn_down_exps.weight"})
    for name, array in tensors.items():
        if name.startswith("model.layers."):
            il, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{il}.{layer_names[rest]}"
            if family in ("olmo2", "gemma2", "gemma3_text", "gpt_oss") and rest == "post_attention_layernorm.weight":
                gname = f"blk.{il}.post_attention_norm.weight"
        else:
            gname = gguf_names[name]
        if f["permute"] and ("q_proj" in name or "k_proj" in name):
            heads = shape["heads"] if "q_proj" in name else shape["kv_heads"]
            array = interleave_rope_halves(array, heads)
        if f.get("gemma") and name.endswith("norm.weight"):  # the converter stores Gemma's 1 + w
            w.add_tensor(gname, plus_one(array, dtype))
            continue
        if array.ndim == 1:  # norms and biases: F32, as the converter writes them
            w.add_tensor(gname, stored_as_f32(array, dtype))
        elif dtype == "BF16":
            w.add_tensor(gname, stored(array, dtype), raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(gname, stored(array, dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def plus_one(array, dtype):
    """1 + w as the converter adds it and writes it (F32): in F16 for an F16 checkpoint (torch keeps F16
    tensors F16 and widens BF16 ones to float32 first), in float32 otherwise."""
    if dtype == "F16":
        return (stored(array, dtype) + np.float16(1.0)).astype(np.float32)
    return stored_as_f32(array, dtype) + np.float32(1.0)


def stored_as_f32(array, dtype):
    """The values the checkpoint holds, widened to F32."""
    bits = stored(array, dtype)
    return (bits.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else bits.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True, choices=sorted(FAMILIES))
    ap.add_argument("--out", required=True, help="the checkpoint folder to write")
    ap.add_argument("--gguf", help="also write llama.cpp's GGUF of the same weights here")
    ap.add_argument("--dtype", default="F16", choices=["F16", "BF16", "F32"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--tied", action="store_true", help="no lm_head: the output reuses the embeddings")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fused-experts", action="store_true", help="save MoE experts stacked, as transformers 5 does")
    ap.add_argument("--unquantized-experts", action="store_true", help="gpt_oss: experts as its dequantized releases store them")
    ap.add_argument("--wrapped", choices=["old", "new"], help="gemma3_text: inside Gemma3ForConditionalGeneration, tensors "
                                                                "under language_model.model. (old) or model.language_model. (new); "
                                                                "qwen3_5_text, gemma4_text: inside Qwen3_5ForConditionalGeneration "
                                                                "or Gemma4ForConditionalGeneration (new)")
    ap.add_argument("--vocab-from", help="a GGUF vocabulary (llama.cpp's vocab suites) instead of a trained one; "
                                         "the model is then a tiny one of the family, gemma4_text for Gemma 4's "
                                         "vocabulary (no --gguf)")
    args = ap.parse_args()

    shape = dict(layers=2, window=0, dim=128, heads=4, kv_heads=2, head_dim=32, ff=256, vocab=640, ctx=512, experts=4, expert_ff=64,
                 rope_theta=10000.0 if FAMILIES[args.family]["arch"] == "llama" else 1000000.0, tied=args.tied,
                 mxfp4=not args.unquantized_experts, wrapped=args.wrapped)
    if args.family == "qwen3":
        shape["head_dim"] = 48  # Qwen3's head size is its own, not dim / heads
    if args.family == "smollm3":
        shape["layers"] = 4  # the fourth has no rope
    if args.family == "phi3":
        shape.update(ctx=4 * PHI3_ORIGINAL_CONTEXT)
    if args.family == "gpt_oss":
        shape.update(window=8, ff=64, expert_ff=64)  # its intermediate_size is each expert's
    if FAMILIES[args.family].get("gemma4"):
        shape.update(tied=True, window=8, layers=hf_gemma4.LAYERS)
    if FAMILIES[args.family].get("gemma"):
        shape.update(tied=True, window=8, head_dim=64, rope_theta=10000.0 if args.family == "gemma2" else 1000000.0)
        shape["layers"] = 6 if args.family == "gemma3_text" else 2  # a global layer after the local ones
    if args.vocab_from:
        tok, _, bos, eos = tokenizer_from_gguf(args.vocab_from)
        FAMILIES[args.family].update(bos=bos, eos=eos, template=None)
        shape.update(vocab=tok.get_vocab_size(with_added_tokens=True), dim=32, heads=2, kv_heads=1, head_dim=16, ff=64,
                     layers=1, tied=True, ple=0)
    else:
        tok = train_tokenizer(args.family, shape["vocab"])
    assert tok.get_vocab_size(with_added_tokens=True) == shape["vocab"], tok.get_vocab_size(with_added_tokens=True)
    tensors = make_weights(args.family, shape, np.random.default_rng(args.seed))
    published = gpt_oss_published(tensors, shape) if args.family == "gpt_oss" else tensors
    write_folder(args.out, args.family, shape, fuse_experts(published, shape) if args.fused_experts else published, tok,
                 args.dtype, args.shards)
    if args.gguf:
        write_gguf(args.gguf, args.family, shape, tensors, tok, args.dtype)


if __name__ == "__main__":
    main()
