#include "engine/drafter_host_models.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

#include "backend/backend.h"
#include "common/error.h"
#include "model/model.h"
#include "plugin/host_services.h"

// The opaque loom_host_model_t of the ABI: one model, its K/V pool and its sequences.
struct loom_host_model {
  struct Seq {
    std::vector<int32_t> blocks;
    uint32_t n_tokens = 0;
  };
  std::unique_ptr<loom::Model> model;
  loom::KvCache kv;
  uint32_t block_size = 16;
  int64_t n_ctx = 0;
  uint32_t table_width = 0;  // block-table entries per forward: fixed so decode steps reuse the op list
  std::vector<int32_t> free_blocks;
  std::unordered_map<uint64_t, Seq> seqs;
  loom::ForwardBatch batch;
  std::vector<float> logits;

  void give_back(Seq& seq, uint32_t n_keep_blocks) {
    while (seq.blocks.size() > n_keep_blocks) {
      free_blocks.push_back(seq.blocks.back());
      seq.blocks.pop_back();
    }
  }
};

namespace loom {

namespace {

thread_local std::string t_last_error;

// A failure with the status the slot returns.
struct SlotError {
  loom_status status;
  std::string message;
};

template <class Body>
loom_status guarded(std::mutex& mutex, Body body) {
  try {
    std::lock_guard lock(mutex);
    body();
    return LOOM_STATUS_OK;
  } catch (const SlotError& e) {
    t_last_error = e.message;
    return e.status;
  } catch (const Error& e) {
    t_last_error = e.what();
    return LOOM_STATUS_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    t_last_error = "out of host memory";
    return LOOM_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    t_last_error = std::string("internal error: ") + e.what();
    return LOOM_STATUS_INTERNAL;
  } catch (...) {
    t_last_error = "internal error: unknown exception";
    return LOOM_STATUS_INTERNAL;
  }
}

}  // namespace

struct HostModelSlots {
  static DrafterHostModels& self(void* context) { return *static_cast<DrafterHostModels*>(context); }

  static loom_host_model_t& known(DrafterHostModels& h, loom_host_model_t* model) {
    if (model == nullptr || std::find(h.models_.begin(), h.models_.end(), model) == h.models_.end()) {
      throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model is not a model opened by this host"};
    }
    return *model;
  }

  static loom_status open(void* context, const char* gguf_path, loom_host_model_t** out_model) {
    DrafterHostModels& h = self(context);
    return guarded(h.mutex_, [&] {
      if (out_model == nullptr) throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model_open: out_model is NULL"};
      *out_model = nullptr;
      if (gguf_path == nullptr || gguf_path[0] == '\0') throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model_open: no path"};
      auto m = std::make_unique<loom_host_model>();
      m->model = Model::load(std::filesystem::path(gguf_path), h.backend_, ModelOptions{h.options_.n_ctx});
      m->n_ctx = std::min<int64_t>(h.options_.n_ctx, m->model->n_ctx());
      m->block_size = std::max<uint32_t>(h.options_.block_size, 1);
      const auto n_blocks = static_cast<uint32_t>((h.options_.capacity_tokens + m->block_size - 1) / m->block_size);
      m->kv = m->model->create_kv_cache(std::max<uint32_t>(n_blocks, 1), m->block_size, h.options_.kv_dtype);
      m->table_width = static_cast<uint32_t>((m->n_ctx + m->block_size - 1) / m->block_size);
      for (uint32_t b = m->kv.n_blocks(); b-- > 0;) m->free_blocks.push_back(static_cast<int32_t>(b));
      h.models_.push_back(m.get());
      *out_model = m.release();
    });
  }

  static void close(void* context, loom_host_model_t* model) {
    DrafterHostModels& h = self(context);
    guarded(h.mutex_, [&] {
      auto it = std::find(h.models_.begin(), h.models_.end(), model);
      if (it == h.models_.end()) return;
      h.models_.erase(it);
      delete model;
    });
  }

  static loom_status get_info(void* context, loom_host_model_t* model, loom_host_model_info* out) {
    DrafterHostModels& h = self(context);
    return guarded(h.mutex_, [&] {
      loom_host_model_t& m = known(h, model);
      if (out == nullptr || out->struct_size < sizeof(loom_host_model_info)) {
        throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model_get_info: out is NULL or its struct_size is too small"};
      }
      out->n_vocab = static_cast<uint32_t>(m.model->info().n_vocab);
      out->n_ctx = static_cast<uint32_t>(m.n_ctx);
    });
  }

  static void forward_chunk(loom_host_model_t& m, loom_host_model_t::Seq& seq, const int32_t* tokens, uint32_t n,
                            bool all_rows) {
    ForwardBatch& b = m.batch;
    b.clear();
    const int32_t bs = static_cast<int32_t>(m.block_size);
    for (uint32_t i = 0; i < n; ++i) {
      const int32_t pos = static_cast<int32_t>(seq.n_tokens + i);
      b.tokens.push_back(tokens[i]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(seq.blocks[static_cast<size_t>(pos / bs)] * bs + pos % bs);
      if (all_rows) b.logit_rows.push_back(static_cast<int32_t>(i));
    }
    if (!all_rows) b.logit_rows.push_back(static_cast<int32_t>(n - 1));
    ForwardBatch::Seq entry;
    entry.first_row = 0;
    entry.n_query = static_cast<int32_t>(n);
    entry.context_len = static_cast<int32_t>(seq.n_tokens + n);
    entry.block_table = seq.blocks;
    entry.block_table.resize(std::max<size_t>(m.table_width, seq.blocks.size()), seq.blocks.front());
    b.seqs.push_back(std::move(entry));
    m.model->forward(b, m.kv, m.logits);
    seq.n_tokens += n;
  }

  static loom_status append(void* context, loom_host_model_t* model, uint64_t seq_id, const int32_t* tokens,
                            uint32_t n_tokens, float* out_logits, float* out_last_logits) {
    DrafterHostModels& h = self(context);
    return guarded(h.mutex_, [&] {
      loom_host_model_t& m = known(h, model);
      if (n_tokens == 0) throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model_append: n_tokens is 0"};
      if (tokens == nullptr) throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model_append: tokens is NULL"};
      const int64_t n_vocab = m.model->info().n_vocab;
      for (uint32_t i = 0; i < n_tokens; ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
          throw SlotError{LOOM_STATUS_INVALID_ARGUMENT, "model_append: token " + std::to_string(tokens[i]) +
                                                            " is outside the vocabulary (0.." +
                                                            std::to_string(n_vocab - 1) + ")"};
        }
      }
      const bool is_new = m.seqs.count(seq_id) == 0;
      loom_host_model_t::Seq& seq = m.seqs[seq_id];
      auto forget_if_new = [&] {
        if (is_new) m.seqs.erase(seq_id);
      };
      if (int64_t(seq.n_tokens) + n_tokens > m.n_ctx) {
        const std::string message = "model_append: sequence " + std::to_string(seq_id) + " would hold " +
                                    std::to_string(int64_t(seq.n_tokens) + n_tokens) + " tokens, the context is " +
                                    std::to_string(m.n_ctx);
        forget_if_new();
        throw SlotError{LOOM_STATUS_OUT_OF_RANGE, message};
      }
      const size_t blocks_needed = (size_t(seq.n_tokens) + n_tokens + m.block_size - 1) / m.block_size;
      if (blocks_needed - seq.blocks.size() > m.free_blocks.size()) {
        forget_if_new();
        throw SlotError{LOOM_STATUS_OUT_OF_MEMORY, "model_append: the draft model's K/V pool is full"};
      }
      while (seq.blocks.size() < blocks_needed) {
        seq.blocks.push_back(m.free_blocks.back());
        m.free_blocks.pop_back();
      }
      const uint32_t start = seq.n_tokens;
      const auto n_vocab_sz = static_cast<size_t>(n_vocab);
      const auto max_batch = static_cast<uint32_t>(std::max<int64_t>(h.options_.max_batch, 1));
      try {
        for (uint32_t done = 0; done < n_tokens;) {
          const uint32_t n = std::min(n_tokens - done, max_batch);
          forward_chunk(m, seq, tokens + done, n, out_logits != nullptr);
          if (out_logits != nullptr) {
            std::memcpy(out_logits + size_t(done) * n_vocab_sz, m.logits.data(), sizeof(float) * n * n_vocab_sz);
          }
          done += n;
        }
      } catch (...) {
        seq.n_tokens = start;
        m.give_back(seq, static_cast<uint32_t>((start + m.block_size - 1) / m.block_size));
        if (seq.n_tokens == 0) m.seqs.erase(seq_id);
        throw;
      }
      if (out_last_logits != nullptr) {
        const float* last = m.logits.data() + (out_logits != nullptr ? m.logits.size() - n_vocab_sz : 0);
        std::memcpy(out_last_logits, last, sizeof(float) * n_vocab_sz);
      }
    });
  }

  static loom_status truncate(void* context, loom_host_model_t* model, uint64_t seq_id, uint32_t n_keep) {
    DrafterHostModels& h = self(context);
    return guarded(h.mutex_, [&] {
      loom_host_model_t& m = known(h, model);
      auto it = m.seqs.find(seq_id);
      if (it == m.seqs.end()) {
        if (n_keep == 0) return;
        throw SlotError{LOOM_STATUS_NOT_FOUND, "model_truncate: unknown sequence " + std::to_string(seq_id)};
      }
      if (n_keep > it->second.n_tokens) {
        throw SlotError{LOOM_STATUS_OUT_OF_RANGE, "model_truncate: n_keep " + std::to_string(n_keep) + " exceeds the " +
                                                      std::to_string(it->second.n_tokens) + " tokens held"};
      }
      it->second.n_tokens = n_keep;
      m.give_back(it->second, (n_keep + m.block_size - 1) / m.block_size);
    });
  }

  static void release(void* context, loom_host_model_t* model, uint64_t seq_id) {
    DrafterHostModels& h = self(context);
    guarded(h.mutex_, [&] {
      loom_host_model_t& m = known(h, model);
      auto it = m.seqs.find(seq_id);
      if (it == m.seqs.end()) return;
      m.give_back(it->second, 0);
      m.seqs.erase(it);
    });
  }

  static const char* last_error(void*) { return t_last_error.c_str(); }
};

DrafterHostModels::DrafterHostModels(Backend& backend, DrafterModelOptions options)
    : backend_(backend), options_(options) {
  services_ = *default_host_services();
  services_.struct_size = sizeof(loom_host_services);
  services_.context = this;
  services_.model_open = HostModelSlots::open;
  services_.model_close = HostModelSlots::close;
  services_.model_get_info = HostModelSlots::get_info;
  services_.model_append = HostModelSlots::append;
  services_.model_truncate = HostModelSlots::truncate;
  services_.model_release = HostModelSlots::release;
  services_.last_error = HostModelSlots::last_error;
}

DrafterHostModels::~DrafterHostModels() {
  for (loom_host_model_t* m : models_) delete m;
}

size_t DrafterHostModels::n_open_models() const {
  std::lock_guard lock(mutex_);
  return models_.size();
}

}  // namespace loom
