// Issue 35 (item 4): what `loom plan` and /v1/models report — the KV layer groups of a model and how
// many sequences fit — agrees with the pool the engine really builds.
#include <catch2/catch.hpp>

#include "engine/engine.h"
#include "engine/kv_plan.h"
#include "gguf/gguf_file.h"
#include "model/model_info.h"
#include "test_model_helpers.h"
#include "test_paths.h"

TEST_CASE("kv plan: a gemma3's layers split into full and sliding groups the engine's pool agrees with", "[kv_plan]") {
  const auto spec = loom::test::small_spec("gemma3");  // 6 layers: 5 local (window 8), 1 global; 2 KV heads of 32
  const auto path = loom::test::write_small_model(spec, "kv-plan-gemma3");
  const auto info = loom::read_model_info(loom::gguf::GgufFile::open(path));

  const auto groups = loom::kv_layer_groups(info, LOOM_DTYPE_F16);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].name == "full attention");
  CHECK(groups[0].n_layers == 1);
  CHECK(groups[0].bytes_per_token == 2u * 2u * 32u * 2u);  // K and V, 2 heads, 32 values, 2 bytes
  CHECK(groups[1].name == "sliding window");
  CHECK(groups[1].n_layers == 5);
  CHECK(groups[1].window == 8);
  CHECK(groups[1].bytes_per_token == 5u * 256u);
  CHECK(loom::kv_layer_groups(info, LOOM_DTYPE_INT8_KV)[0].bytes_per_token == 2u * 2u * (4u + 32u));

  const uint64_t pool = 1 << 20;
  loom::Config config;
  config.plugins.search_path = {loom::test::plugin_build_dir().string()};
  config.backend.threads = 2;
  config.kv.memory_bytes = int64_t(pool);
  config.kv.block_size = 4;
  config.kv.dtype = "f16";
  loom::Engine engine(config, path);
  CHECK(engine.info().kv_bytes_per_token == loom::kv_bytes_per_token(info, LOOM_DTYPE_F16));
  CHECK(engine.info().kv_groups.size() == 2);
  // A ring would hold the whole 256-token context, so "auto" keeps every token in the pool: it holds
  // the pool's worth of 100-token sequences over all six layers.
  CHECK(engine.info().kv_window_rings == 0);
  CHECK(engine.info().kv_layout.sequences_of(100) == pool / (1536u * 100u));
}

TEST_CASE("kv plan: window rings take the sliding layers out of the pool, and the engine builds that layout", "[kv_plan]") {
  const auto spec = loom::test::small_spec("gemma3");  // 5 sliding layers (window 8) of 256 bytes per token, 1 full
  const auto path = loom::test::write_small_model(spec, "kv-plan-gemma3-rings");
  const auto info = loom::read_model_info(loom::gguf::GgufFile::open(path));
  const auto groups = loom::kv_layer_groups(info, LOOM_DTYPE_F16);

  loom::KvPoolRequest request;
  request.budget_bytes = 1 << 20;
  request.block_size = 4;
  request.ring_blocks = 4;  // 16 tokens: the window and 9 rows per step
  request.typical_tokens = 64;
  request.max_tokens = 256;
  request.max_seqs = 16;
  request.checkpoints = 16;
  const auto layout = loom::plan_kv_pool(groups, request);
  const uint64_t ring_bytes = 1280u * 16u;
  CHECK(layout.ring_bytes == ring_bytes);
  CHECK(layout.block_bytes == 256u * 4u);  // the full layer only
  // Balanced for 64-token sequences: a ring, a quarter ring of checkpoints, 64 tokens of the full layer.
  CHECK(layout.n_rings == std::min<uint64_t>(16, (1u << 20) / (ring_bytes + ring_bytes / 4 + 256u * 64u)));
  CHECK(layout.n_ring_checkpoints == std::max<uint32_t>(1, layout.n_rings / 4));
  CHECK(layout.n_blocks == ((1u << 20) - layout.rings_bytes()) / layout.block_bytes);
  CHECK(layout.sequences_of(64) == std::min<uint64_t>(layout.n_rings, layout.n_blocks / 16));

  // Rings asked for that the budget cannot hold: an error naming the way out, or none when optional.
  request.rings = 4096;
  CHECK_THROWS_WITH(loom::plan_kv_pool(groups, request), Catch::Contains("window rings") && Catch::Contains("sliding_layers"));
  request.rings_optional = true;
  CHECK(loom::plan_kv_pool(groups, request).ring_blocks == 0);

  loom::Config config;
  config.plugins.search_path = {loom::test::plugin_build_dir().string()};
  config.backend.threads = 2;
  config.kv.memory_bytes = 1 << 20;
  config.kv.block_size = 4;
  config.kv.dtype = "f16";
  config.kv.window_chunk_tokens = 9;
  config.scheduler.max_num_seqs = 16;
  loom::Engine engine(config, path);
  CHECK(engine.info().kv_window_rings == layout.n_rings);
  CHECK(engine.info().kv_window_ring_tokens == 16);
  CHECK(engine.info().kv_capacity_tokens == layout.n_blocks * 4);
  CHECK(engine.info().kv_bytes <= (1u << 20));
}
