// Images through the engine: prompts built around image markers, the rows decoded in one chunk
// (non-causally), the same answer as llama.cpp's mtmd, and the second turn served from the caches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "test_engine_helpers.h"
#include "engine/sequence.h"
#include "gguf/synth_model.h"
#include "test_vision_golden.h"
#include "tokenizer/tokenizer.h"
#include "vision/image_decode.h"

using namespace loom;

namespace {

vision::RgbImage golden_image(const test::VisionGolden& g) {
  std::ifstream in(g.image, std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  return vision::decode_image(bytes);
}

// The text of the golden prompt and the tokens mtmd made of it, flattened, image rows as -1.
std::vector<int32_t> golden_layout(const test::VisionGolden& g) {
  std::vector<int32_t> out;
  for (const auto& chunk : g.json.at("chunks")) {
    if (chunk.contains("image")) out.insert(out.end(), chunk.at("image").get<size_t>(), -1);
    else for (const auto& t : chunk.at("text")) out.push_back(t.get<int32_t>());
  }
  return out;
}

}  // namespace

TEST_CASE("engine: an image prompt answers as mtmd does, in any chunking, and is cached", "[engine][vision]") {
  // Gemma 3 (16 rows, wrapped, non-causal) and LLaVA (64 rows, bare, causal); each step budget once
  // larger than the prompt and once smaller, so the text around the image goes in other chunks.
  struct Case {
    const char* golden;
    uint32_t rows;
    int64_t max_batched[2];
  };
  // Pixtral (59 rows for this image, [IMG_END] after): the step budget must hold its largest square
  // image (1055 rows), so both budgets take the whole prompt.
  // SmolVLM (idefics3): 5 parts of 16 rows with text between them; a budget of 20 splits between parts.
  // Gemma 4 (gemma4v, 77 rows here, wrapped, non-causal; per-layer embeddings): the budget must hold its
  // largest image (1120 rows, any shape within the pixel limit), and the sliding-window rings widen to
  // take it (the default window_chunk_tokens is 512).
  // Qwen2.5-VL (qwen25vl, 54 rows, causal): M-RoPE positions through the engine (the rows by their place
  // in the grid, the text after them 45 positions behind its KV index); the budget holds 4096 cells.
  // Qwen3-VL (qwen3vl): the same, with interleaved sections and rows four times as wide (deepstack).
  for (const Case& c : {Case{"gemma3-synth", 16, {64, 20}}, Case{"llava-mlp-synth", 64, {128, 66}}, Case{"pixtral-synth", 1055, {1055, 2048}},
                        Case{"idefics3-synth", 80, {128, 20}}, Case{"gemma4v-synth", 1089, {1120, 2048}},
                        Case{"qwen25vl-synth", 4096, {4096, 8192}}, Case{"qwen3vl-synth", 4096, {4096, 8192}}})
  for (const int64_t max_batched : c.max_batched) {
    DYNAMIC_SECTION(c.golden << ", max_batched_tokens " << max_batched) {
      const test::VisionGolden g = test::load_vision_golden(c.golden);
      // The mmproj lies beside the model (llama.cpp's layout): found without [model] mmproj.
      Config config = test::engine_config(8ll << 20, max_batched);
      config.kv.dtype = "f16";
      config.kv.block_size = 16;
      Engine engine(config, g.text_model);
      REQUIRE(engine.takes_images());
      CHECK(engine.info().image_rows == c.rows);

      const EncodedImage image = engine.encode_image(golden_image(g));
      const ImagePrompt prompt = build_image_prompt(engine.tokenizer(), g.json.at("prompt").get<std::string>(), {image}, engine.image_format());
      // Token for token mtmd's layout: BOS, the text, (Gemma 3: <start_of_image>) the rows, (<end_of_image>) the text.
      const std::vector<int32_t> layout = golden_layout(g);
      REQUIRE(prompt.tokens.size() == layout.size());
      size_t image_chunks = 0;
      for (const auto& chunk : g.json.at("chunks")) image_chunks += chunk.contains("image") ? 1 : 0;
      REQUIRE(prompt.images.size() == image_chunks);
      for (size_t i = 0; i < layout.size(); i++) {
        bool row = false;
        for (const PromptImage& part : prompt.images) row = row || (i >= part.first && i < part.first + part.n_rows);
        CHECK(row == (layout[i] == -1));
        if (!row) CHECK(prompt.tokens[i] == layout[i]);
      }

      test::Outcome first, second;
      Request request = test::greedy_request(prompt.tokens, 16, &first, engine);
      request.images = prompt.images;
      engine.submit(std::move(request));
      test::run_until_done(engine);
      REQUIRE(first.finish == FinishReason::length);
      CHECK(first.tokens == g.json.at("greedy").get<std::vector<int32_t>>());

      // The next turn: the same image again costs no encoding and its blocks come from the prefix cache.
      const EncodedImage again = engine.encode_image(golden_image(g));
      CHECK(again.rows == image.rows);
      CHECK(engine.stats().images_encoded == 1);
      CHECK(engine.stats().image_cache_hits == 1);
      Request repeat = test::greedy_request(prompt.tokens, 16, &second, engine);
      repeat.images = prompt.images;
      engine.submit(std::move(repeat));
      test::run_until_done(engine);
      // Every full block of 16 but the one holding the last prompt token, image rows included.
      CHECK(second.n_cached == uint32_t((prompt.tokens.size() - 1) / 16 * 16));
      CHECK(second.tokens == first.tokens);
    }
  }
}

TEST_CASE("engine: a different image does not hit the first image's cached blocks", "[engine][vision]") {
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  Config config = test::engine_config(8ll << 20, 64);
  config.kv.block_size = 4;
  Engine engine(config, g.text_model);
  vision::RgbImage a = golden_image(g), b = a;
  b.pixels[0] ^= 0xff;  // one pixel differs
  const EncodedImage ea = engine.encode_image(a), eb = engine.encode_image(b);
  CHECK(ea.hash != eb.hash);
  const ImagePrompt pa = build_image_prompt(engine.tokenizer(), "look <__media__> at it", {ea}, engine.image_format());
  const ImagePrompt pb = build_image_prompt(engine.tokenizer(), "look <__media__> at it", {eb}, engine.image_format());
  test::Outcome oa, ob;
  Request ra = test::greedy_request(pa.tokens, 4, &oa, engine);
  ra.images = pa.images;
  engine.submit(std::move(ra));
  test::run_until_done(engine);
  Request rb = test::greedy_request(pb.tokens, 4, &ob, engine);
  rb.images = pb.images;
  engine.submit(std::move(rb));
  test::run_until_done(engine);
  // Only the text before the image is shared: BOS, "look ", <start_of_image> (7 tokens: one block of 4).
  CHECK(ob.n_cached == 4);
}

TEST_CASE("engine: image requests that cannot run are refused by name", "[engine][vision]") {
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  SECTION("an image larger than a step") {
    Config config = test::engine_config(8ll << 20, 8);
    config.model.mmproj = g.mmproj.string();  // named: an error (found beside the model: a warning, text only)
    CHECK_THROWS_WITH(Engine(config, g.text_model), Catch::Contains("max_batched_tokens"));
  }
  SECTION("images without an encoder, and rows that do not fit the prompt") {
    Config config = test::engine_config(8ll << 20, 64);
    Engine engine(config, g.text_model);
    const EncodedImage image = engine.encode_image(golden_image(g));
    const ImagePrompt prompt = build_image_prompt(engine.tokenizer(), "a <__media__>", {image}, engine.image_format());
    test::Outcome out;
    Request request = test::greedy_request(prompt.tokens, 4, &out, engine);
    request.images = prompt.images;
    request.images[0].first = uint32_t(prompt.tokens.size()) - 2;
    CHECK_THROWS_WITH(engine.submit(std::move(request)), Catch::Contains("outside the prompt"));
    CHECK_THROWS_WITH(build_image_prompt(engine.tokenizer(), "a <__media__> b <__media__>", {image}, engine.image_format()),
                      Catch::Contains("more image markers"));
  }
}

TEST_CASE("engine: an image prompt runs while another request decodes", "[engine][vision]") {
  // Beside a decoding stream, prompts get prefill_tokens_while_decoding per step (8 here), less than an
  // image's 16 rows: the image still runs, whole, within max_batched_tokens.
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  Config config = test::engine_config(8ll << 20, 64);
  config.kv.dtype = "f16";
  config.kv.block_size = 16;
  config.scheduler.prefill_tokens_while_decoding = 8;
  Engine engine(config, g.text_model);
  test::Outcome busy, image_answer;
  engine.submit(test::greedy_request(test::prompt_of(5, 12), 200, &busy, engine));
  for (int i = 0; i < 3; i++) engine.step();  // the first request is decoding now
  const EncodedImage image = engine.encode_image(golden_image(g));
  const ImagePrompt prompt = build_image_prompt(engine.tokenizer(), g.json.at("prompt").get<std::string>(), {image}, engine.image_format());
  Request request = test::greedy_request(prompt.tokens, 16, &image_answer, engine);
  request.images = prompt.images;
  engine.submit(std::move(request));
  for (int guard = 0; image_answer.finish == FinishReason::none; ++guard) {
    REQUIRE(guard < 100);  // answered while the other request still decodes, not after it
    engine.step();
  }
  CHECK(busy.finish == FinishReason::none);
  CHECK(image_answer.tokens == g.json.at("greedy").get<std::vector<int32_t>>());
  test::run_until_done(engine);
}

TEST_CASE("engine: a projector beside the model that does not fit it is skipped, a configured one is an error", "[engine][vision]") {
  const auto dir = test::scratch_dir("vision-mismatch");
  gguf::SynthSpec spec;  // width 64: the synthetic mmproj below feeds 128
  spec.arch = "gemma3";
  spec.n_layers = 2;
  spec.image_markers = true;
  gguf::write_synthetic_model(spec, dir / "text.gguf");
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  std::filesystem::copy_file(g.mmproj, dir / "mmproj-other.gguf", std::filesystem::copy_options::overwrite_existing);
  Config config = test::engine_config(8ll << 20, 64);
  Engine text_only(config, dir / "text.gguf");
  CHECK_FALSE(text_only.takes_images());
  config.model.mmproj = (dir / "mmproj-other.gguf").string();
  CHECK_THROWS_WITH(Engine(config, dir / "text.gguf"), Catch::Contains("takes 64"));
}

// A user who writes mtmd's marker gets it as text: chat messages mark images with a private marker.
TEST_CASE("engine: '<__media__>' in a user's text is text, not an image slot", "[engine][vision]") {
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  Config config = test::engine_config(8ll << 20, 64);
  Engine engine(config, g.text_model);
  const EncodedImage image = engine.encode_image(golden_image(g));
  const std::string marker(private_image_marker());
  CHECK(marker != kImageMarker);
  CHECK(marker == std::string(private_image_marker()));  // one per process
  const ImagePrompt prompt =
      build_image_prompt(engine.tokenizer(), "what is <__media__>? " + marker + " this", {image}, engine.image_format(), marker);
  REQUIRE(prompt.images.size() == 1);
  // The literal went through the tokenizer: the tokens before the image are those of the text alone.
  const ImagePrompt text_only = build_image_prompt(engine.tokenizer(), "what is <__media__>? ", {}, engine.image_format(), marker);
  REQUIRE(prompt.images[0].first > text_only.tokens.size());
  CHECK(std::equal(text_only.tokens.begin(), text_only.tokens.end(), prompt.tokens.begin()));
}

// Penalties count what was said, not an image's placeholder ids (hashes that stand for rows).
TEST_CASE("engine: the penalties' history leaves image rows out", "[engine][vision]") {
  Sequence seq;
  seq.tokens = {1, 2, 100, 101, 102, 3, 200, 201, 4, 5};  // two images: 100..102 and 200..201, then 5 generated
  seq.request.images = {PromptImage{2, 3, nullptr, false}, PromptImage{6, 2, nullptr, false}};
  const std::span<const int32_t> history = seq.penalty_history();
  CHECK(std::vector<int32_t>(history.begin(), history.end()) == std::vector<int32_t>{1, 2, 3, 4, 5});
  Sequence text;
  text.tokens = {7, 8, 9};
  CHECK(text.penalty_history().data() == text.tokens.data());  // no copy without images
}

// Through the engine: with a strong repetition penalty over the whole history, what the image's
// placeholder ids are must not matter. The second request's image rows carry the first request's own
// answer as ids, which a penalty that counted them would push down.
TEST_CASE("engine: an image's placeholder ids do not feed the repetition penalty", "[engine][vision]") {
  const test::VisionGolden g = test::load_vision_golden("gemma3-synth");
  Config config = test::engine_config(8ll << 20, 64);
  Engine engine(config, g.text_model);
  const EncodedImage image = engine.encode_image(golden_image(g));
  const ImagePrompt prompt = build_image_prompt(engine.tokenizer(), g.json.at("prompt").get<std::string>(), {image}, engine.image_format());
  auto run = [&](std::vector<int32_t> tokens) {
    test::Outcome out;
    Request request = test::greedy_request(std::move(tokens), 8, &out, engine);
    request.images = prompt.images;
    request.sampling.params.repetition_penalty = 3.0f;
    request.sampling.params.penalty_last_n = -1;
    engine.submit(std::move(request));
    test::run_until_done(engine);
    REQUIRE(out.finish == FinishReason::length);
    return out.tokens;
  };
  const std::vector<int32_t> first = run(prompt.tokens);
  std::vector<int32_t> relabelled = prompt.tokens;
  const PromptImage& rows = prompt.images[0];
  for (uint32_t i = 0; i < rows.n_rows; i++) relabelled[rows.first + i] = first[i % first.size()];
  CHECK(run(relabelled) == first);
}

// An image prompt through speculative decoding (n-gram drafts over a prompt whose image parts carry
// placeholder ids) gives mtmd's greedy tokens; with a grammar the answer follows it. A tiled image
// (idefics3: five parts with text between them) and one of its own size (pixtral).
TEST_CASE("engine: image prompts keep speculative decoding exact and structured output valid", "[engine][vision]") {
  for (const char* golden : {"idefics3-synth", "pixtral-synth"}) {
    DYNAMIC_SECTION(golden) {
      const test::VisionGolden g = test::load_vision_golden(golden);
      Config config = test::engine_config(8ll << 20, 2048);
      config.drafter.kind = "ngram";
      config.drafter.k = 4;
      Engine engine(config, g.text_model);
      const EncodedImage image = engine.encode_image(golden_image(g));
      const ImagePrompt prompt = build_image_prompt(engine.tokenizer(), g.json.at("prompt").get<std::string>(), {image}, engine.image_format());
      // A repetitive answer, so the n-gram drafter finds something to propose.
      test::Outcome drafted;
      Request request = test::greedy_request(prompt.tokens, 16, &drafted, engine);
      request.images = prompt.images;
      engine.submit(std::move(request));
      test::run_until_done(engine);
      CHECK(drafted.tokens == g.json.at("greedy").get<std::vector<int32_t>>());
      INFO("drafts proposed " << engine.stats().draft_tokens_proposed << ", accepted " << engine.stats().draft_tokens_accepted);
      CHECK(engine.stats().draft_verifications > 0);

      test::Outcome constrained;
      Request shaped = test::greedy_request(prompt.tokens, 12, &constrained, engine);
      shaped.images = prompt.images;
      shaped.ignore_eos = false;
      shaped.constraint = engine.compile_constraint({GrammarSpec::Kind::regex, "(alpha|beta)-[0-9]{3}", {}});
      engine.submit(std::move(shaped));
      test::run_until_done(engine);
      INFO("constrained: " << constrained.text);
      CHECK((constrained.text.rfind("alpha-", 0) == 0 || constrained.text.rfind("beta-", 0) == 0));
      const std::string digits = constrained.text.substr(constrained.text.find('-') + 1);
      CHECK(digits.size() == 3);
      CHECK(std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }));
    }
  }
}

// Image prompts preempted when the pool runs out are recomputed, rows included, and answer as they do
// alone: four LLaVA prompts with different images, 84 tokens each plus 40 generated, in a pool of 16
// blocks of 16 (each request alone needs 8).
TEST_CASE("engine: preempted image prompts are recomputed with their rows and change no output", "[engine][vision]") {
  const test::VisionGolden g = test::load_vision_golden("llava-mlp-synth");
  Config config = test::engine_config(0, 256);
  config.kv.dtype = "f16";
  config.kv.block_size = 16;
  config.kv.memory_bytes = 16 * 16 * 1024;  // 4 layers x K and V x 2 heads x 32 values x 2 bytes = 1 KiB a token
  config.kv.prefix_caching = false;         // a preempted prompt is recomputed, not found again
  Engine engine(config, g.text_model);
  REQUIRE(engine.info().kv_blocks == 16);
  std::vector<ImagePrompt> prompts;
  for (uint8_t shade : {0, 60, 120, 180}) {
    vision::RgbImage image = golden_image(g);
    for (size_t i = 0; i < image.pixels.size() / 2; i++) image.pixels[i] = uint8_t(image.pixels[i] ^ shade);  // a different top half
    prompts.push_back(build_image_prompt(engine.tokenizer(), g.json.at("prompt").get<std::string>(), {engine.encode_image(image)},
                                         engine.image_format()));
  }
  auto request = [&](const ImagePrompt& prompt, test::Outcome* out) {
    Request r = test::greedy_request(prompt.tokens, 40, out, engine);
    r.images = prompt.images;
    return r;
  };
  std::vector<test::Outcome> alone(prompts.size()), together(prompts.size());
  for (size_t i = 0; i < prompts.size(); i++) {
    engine.submit(request(prompts[i], &alone[i]));
    test::run_until_done(engine);
  }
  const uint64_t preemptions_before = engine.stats().preemptions;
  for (size_t i = 0; i < prompts.size(); i++) engine.submit(request(prompts[i], &together[i]));
  test::run_until_done(engine);
  CHECK(engine.stats().preemptions > preemptions_before);
  for (size_t i = 0; i < prompts.size(); i++) {
    INFO("request " << i);
    CHECK(together[i].finish == FinishReason::length);
    CHECK(together[i].tokens == alone[i].tokens);
  }
  CHECK(alone[0].tokens != alone[1].tokens);  // the images differ, and so do the answers
  CHECK(engine.stats().kv_blocks_used == 0);
}
