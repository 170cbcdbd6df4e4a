// The BERT part of the synthetic-model writer (all-MiniLM, bge, e5 in llama.cpp's layout): a WordPiece
// vocabulary ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, then characters, "##" pieces and
// words), token, token-type and absolute position embeddings with a layer norm, post-norm blocks with
// biased q/k/v/out and a GELU FFN, mean pooling, non-causal attention; with SynthSpec::classifier,
// a cross-encoder reranker (rank pooling and bge-reranker's cls and cls.output heads).
#pragma once

#include "gguf/synth_model.h"

namespace loom::gguf {

class GgufWriter;

void build_bert_model(const SynthSpec& spec, GgufWriter& writer);  // metadata, vocabulary and tensors

}  // namespace loom::gguf
