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

  // 100 tokens in blocks of 4: as allocated, every layer keeps all 100; windowed, the sliding layers
  // keep their 8 tokens plus the block being written (12).
  const uint64_t pool = 1 << 20;
  const auto fit = loom::sequences_that_fit(groups, pool, 4, 100);
  CHECK(fit.allocated == pool / (1536u * 100u));
  CHECK(fit.windowed == pool / (256u * 100u + 1280u * 12u));

  loom::Config config;
  config.plugins.search_path = {loom::test::plugin_build_dir().string()};
  config.backend.threads = 2;
  config.kv.memory_bytes = int64_t(pool);
  config.kv.block_size = 4;
  config.kv.dtype = "f16";
  loom::Engine engine(config, path);
  CHECK(engine.info().kv_bytes_per_token == loom::kv_bytes_per_token(info, LOOM_DTYPE_F16));
  CHECK(engine.info().kv_groups.size() == 2);
  // The engine's pool holds exactly the allocated fit's worth of 100-token sequences.
  CHECK(engine.info().kv_capacity_tokens / 100 == loom::sequences_that_fit(groups, engine.info().kv_bytes, 4, 100).allocated);
}
