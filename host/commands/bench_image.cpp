// `loom bench --image`: what an image costs. The encoder runs uncached `rounds` times (the median is
// reported), then a prompt holding the image is prefilled from nothing `rounds` times with the prefix
// cache off: its time to first token with the rows already encoded, and with the encoding added, as a
// first request with a new image sees it. scripts/bench_vision.py sets these against llama-mtmd-cli on the
// same files, in the same run.
#include "bench_image.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "vision/image_decode.h"
#include "vision/vision_encoder.h"

namespace loom::host {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int run_image_bench(Config config, const std::filesystem::path& model_path, const std::string& image_path, int rounds,
                    const std::string& json_path) {
  config.kv.prefix_caching = false;  // every round prefills the whole prompt
  Engine engine(config, model_path);
  if (!engine.takes_images()) throw std::runtime_error("--image: this model has no vision encoder (pass --mmproj FILE)");
  std::ifstream in(image_path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read the image '" + image_path + "'");
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  const vision::RgbImage image = vision::decode_image(bytes);

  std::cerr << "encoding " << image_path << " (" << image.width << "x" << image.height << ") " << rounds << " times...\n";
  std::vector<double> encode_s;
  EncodedImage encoded;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up (first touch of the weights and scratch)
    const auto start = Clock::now();
    encoded = engine.encode_image(image, /*use_cache=*/false);
    if (r > 0) encode_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  const ImagePrompt prompt = build_image_prompt(engine.tokenizer(), std::string(kImageMarker) + "Describe this image.", {encoded},
                                                engine.image_format());
  std::cerr << "prefilling the " << prompt.tokens.size() << "-token image prompt " << rounds << " times...\n";
  std::vector<double> ttft_s;
  for (int r = 0; r <= rounds; ++r) {
    Request request;
    request.prompt = prompt.tokens;
    request.images = prompt.images;
    request.max_tokens = 1;
    request.sampling.params = engine.default_sampling();
    request.sampling.params.temperature = 0.0f;
    Clock::time_point first{};
    request.on_event = [&first](const RequestEvent& e) {
      if (!e.tokens.empty() && first == Clock::time_point{}) first = Clock::now();
    };
    const auto start = Clock::now();
    engine.submit(std::move(request));
    while (engine.n_unfinished() > 0) engine.step();
    if (r > 0) ttft_s.push_back(std::chrono::duration<double>(first - start).count());
  }
  const vision::MmprojInfo& v = engine.vision_encoder()->info();
  const double encode_ms = 1e3 * median(encode_s), ttft_ms = 1e3 * median(ttft_s);
  std::cout << std::fixed << std::setprecision(1);
  const vision::ImageSize input = vision::target_size(v.preprocess, image.width, image.height);
  const uint64_t patches = uint64_t(input.width / v.patch_size) * (input.height / v.patch_size);
  std::cout << "image      " << image_path << " " << image.width << "x" << image.height << " -> " << input.width << "x"
            << input.height << ", " << patches << " patches, " << encoded.n_rows << " rows ("
            << vision::projector_type_name(v.projector) << ", " << v.n_layers << " layers of " << v.dim << ")\n";
  std::cout << "encode     " << encode_ms << " ms per image (median of " << rounds << ")\n";
  std::cout << "prefill    " << ttft_ms << " ms to the first token of the " << prompt.tokens.size()
            << "-token image prompt, rows given\n";
  std::cout << "ttft       " << encode_ms + ttft_ms << " ms for a new image (encode + prefill)\n";
  if (!json_path.empty()) {
    const nlohmann::json report = {{"model", model_path.string()},
                                   {"mmproj", engine.info().mmproj_path},
                                   {"backend", engine.info().backend_name},
                                   {"image", image_path},
                                   {"rows", encoded.n_rows},
                                   {"prompt_tokens", prompt.tokens.size()},
                                   {"encode_ms", encode_ms},
                                   {"encode_ms_rounds", encode_s},
                                   {"prefill_ttft_ms", ttft_ms},
                                   {"ttft_ms", encode_ms + ttft_ms}};
    std::ofstream(json_path) << report.dump(2) << "\n";
    std::cout << "wrote " << json_path << "\n";
  }
  return 0;
}

}  // namespace loom::host
