// Reference output of llama.cpp's mtmd for Loom's vision tests (built and run by
// scripts/make_vision_golden.py against a llama.cpp build; not part of Loom's build).
//
// usage: mtmd_reference TEXT_MODEL MMPROJ IMAGE PROMPT
// Prints one JSON object: the prompt's chunks (text tokens, or an image's row count), the encoder's
// input pixels (planar float, as the graph received them), the image's embedding rows, the 20 highest
// logits after the whole prompt and 16 greedy tokens. CPU, 2 threads, flash attention off.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

namespace {

// The patch convolution's input of every encoder pass while g_capture is set (a tiled image's tiles,
// then its overview, as mtmd encodes them), captured from the encoder's graph.
std::vector<float> g_pixels;
bool g_capture = true;

bool capture_pixels(ggml_tensor* t, bool ask, void*) {
  if (t->op != GGML_OP_IM2COL) return false;
  if (ask) return true;
  const ggml_tensor* image = t->src[1];
  if (!g_capture || image->ne[2] != 3) return true;  // later passes, or a later im2col (pixtral's patch merger)
  const size_t at = g_pixels.size();
  g_pixels.resize(at + size_t(ggml_nelements(image)));
  ggml_backend_tensor_get(image, g_pixels.data() + at, 0, ggml_nbytes(image));
  return true;
}

void print_floats(const char* name, const float* v, size_t n) {
  std::printf("\"%s\": [", name);
  for (size_t i = 0; i < n; i++) std::printf("%s%.9g", i ? ", " : "", double(v[i]));
  std::printf("]");
}

std::vector<std::pair<int, float>> top_logits(const float* logits, int n_vocab, int k) {
  std::vector<std::pair<int, float>> all;
  for (int i = 0; i < n_vocab; i++) all.emplace_back(i, logits[i]);
  std::partial_sort(all.begin(), all.begin() + k, all.end(), [](auto& a, auto& b) { return a.second > b.second; });
  all.resize(size_t(k));
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s TEXT_MODEL MMPROJ IMAGE PROMPT\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model_params mparams = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mparams);
  if (!model) return 1;
  llama_context_params cparams = llama_context_default_params();
  cparams.n_ctx = 512;
  cparams.n_batch = cparams.n_ubatch = 512;  // the image's rows in one non-causal ubatch
  cparams.n_threads = cparams.n_threads_batch = 2;
  cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* lctx = llama_init_from_model(model, cparams);

  mtmd_context_params vparams = mtmd_context_params_default();
  vparams.use_gpu = false;
  vparams.n_threads = 2;
  vparams.warmup = false;
  vparams.print_timings = false;
  vparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  vparams.cb_eval = capture_pixels;
  mtmd_context* vctx = mtmd_init_from_file(argv[2], model, vparams);
  if (!vctx || !lctx) return 1;

  mtmd_bitmap* bitmap = mtmd_helper_bitmap_init_from_file(vctx, argv[3], false, mtmd_helper_init_opt_default()).bitmap;
  if (!bitmap) return 1;
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  const mtmd_input_text text{argv[4], std::strlen(argv[4]), /*add_special=*/true, /*parse_special=*/true};
  const mtmd_bitmap* bitmaps[] = {bitmap};
  if (mtmd_tokenize(vctx, chunks, &text, bitmaps, 1) != 0) return 1;

  std::printf("{\"chunks\": [");
  std::vector<float> rows;
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
    const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks, i);
    if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* tokens = mtmd_input_chunk_get_tokens_text(chunk, &n);
      std::printf("%s{\"text\": [", i ? ", " : "");
      for (size_t t = 0; t < n; t++) std::printf("%s%d", t ? ", " : "", tokens[t]);
      std::printf("]}");
    } else {
      const size_t n = mtmd_input_chunk_get_n_tokens(chunk);
      if (mtmd_encode_chunk(vctx, chunk) != 0) return 1;
      const int n_embd = llama_model_n_embd_inp(model);
      const float* embd = mtmd_get_output_embd(vctx);
      rows.insert(rows.end(), embd, embd + n * size_t(n_embd));  // every image chunk's rows, in order
      std::printf("%s{\"image\": %zu}", i ? ", " : "", n);
    }
  }
  g_capture = false;
  std::printf("], ");
  print_floats("pixels", g_pixels.data(), g_pixels.size());
  std::printf(", ");
  print_floats("rows", rows.data(), rows.size());

  llama_pos n_past = 0;
  if (mtmd_helper_eval_chunks(vctx, lctx, chunks, 0, 0, 512, /*logits_last=*/true, &n_past) != 0) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::printf(", \"n_past\": %d, \"top\": [", int(n_past));
  const auto top = top_logits(llama_get_logits_ith(lctx, -1), n_vocab, 20);
  for (size_t i = 0; i < top.size(); i++) std::printf("%s[%d, %.6g]", i ? ", " : "", top[i].first, double(top[i].second));
  std::printf("], \"greedy\": [");
  for (int step = 0; step < 16; step++) {
    llama_token next = top_logits(llama_get_logits_ith(lctx, -1), n_vocab, 1)[0].first;
    std::printf("%s%d", step ? ", " : "", next);
    llama_batch batch = llama_batch_get_one(&next, 1);
    if (llama_decode(lctx, batch) != 0) return 1;
  }
  std::printf("]}\n");
  mtmd_input_chunks_free(chunks);
  mtmd_bitmap_free(bitmap);
  mtmd_free(vctx);
  llama_free(lctx);
  llama_model_free(model);
  return 0;
}
