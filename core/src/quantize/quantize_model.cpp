#include "quantize/quantize_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <system_error>

#include "common/error.h"
#include "gguf/dtype_traits.h"
#include "gguf/gguf_file.h"
#include "hf/hf_checkpoint.h"
#include "gguf/gguf_writer.h"
#include "quantize/calibration.h"
#include "quantize/quantizer.h"
#include "quantize/tensor_codec.h"

namespace loom {

namespace fs = std::filesystem;

namespace {

// A metadata value exactly as the writer's set_raw wants it: scalars and strings are stored as
// read; arrays get their element type and count back in front of the elements.
std::vector<uint8_t> encode_value(const gguf::MetadataValue& value) {
  std::vector<uint8_t> out;
  if (value.type == gguf::ValueType::array) {
    const auto element_type = static_cast<uint32_t>(value.array_type);
    out.resize(12);
    std::memcpy(out.data(), &element_type, 4);
    std::memcpy(out.data() + 4, &value.array_size, 8);
  }
  out.insert(out.end(), value.raw.begin(), value.raw.end());
  return out;
}

struct ErrorStats {
  double rms_in = 0.0, rel_rms = 0.0, rel_max = 0.0;
};

ErrorStats compare(std::span<const float> in, std::span<const float> out) {
  double ss_in = 0.0, ss_err = 0.0, max_in = 0.0, max_err = 0.0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double a = in[i], e = double(out[i]) - a;
    ss_in += a * a;
    ss_err += e * e;
    max_in = std::max(max_in, std::fabs(a));
    max_err = std::max(max_err, std::fabs(e));
  }
  ErrorStats s;
  const double n = std::max<double>(1.0, static_cast<double>(in.size()));
  s.rms_in = std::sqrt(ss_in / n);
  s.rel_rms = ss_in > 0.0 ? std::sqrt(ss_err / ss_in) : std::sqrt(ss_err / n);
  s.rel_max = max_in > 0.0 ? max_err / max_in : max_err;
  return s;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace

void copy_gguf_metadata(const gguf::GgufFile& in, gguf::GgufWriter& writer, const std::vector<std::string>& skip) {
  for (const auto& entry : in.metadata()) {
    // The writer records the alignment itself.
    // A file Loom quantized before carries the earlier run's loom.quantize.* record: this run writes its own.
    if (entry.key == "general.alignment" || entry.key.starts_with("loom.quantize.") ||
        std::find(skip.begin(), skip.end(), entry.key) != skip.end()) {
      continue;
    }
    writer.set_raw(entry.key, static_cast<uint32_t>(entry.value.type), encode_value(entry.value));
  }
}

void check_output_path(const fs::path& input, const fs::path& output, bool force) {
  std::error_code ec;
  if (output.empty()) throw Error("no output file given");
  if (same_file(input, output) || fs::absolute(input).lexically_normal() == fs::absolute(output).lexically_normal()) {
    throw Error("refusing to overwrite the input file '" + input.string() + "' (the output '" + output.string() +
                "' is the same file); write to another path");
  }
  // A symlink whose target is missing still names a file the write would create through it.
  if (fs::is_symlink(fs::symlink_status(output, ec))) {
    const fs::path target = fs::read_symlink(output, ec);
    if (!ec && same_file(input, output.parent_path() / target)) {
      throw Error("refusing to overwrite the input file '" + input.string() + "' through the symlink '" +
                  output.string() + "'");
    }
  }
  if (fs::exists(fs::symlink_status(output, ec)) && !force) {
    throw Error("the output file '" + output.string() + "' exists; pass --force to replace it");
  }
  const fs::path folder = output.has_parent_path() ? output.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec)) throw Error("the output folder '" + folder.string() + "' does not exist");
}

QuantizeReport quantize_model(const QuantizeOptions& options, const Quantizer& quantizer,
                              const QuantizeProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  check_output_path(options.input, options.output, options.force);
  const gguf::GgufFile in = hf::open_model_file(options.input);  // a GGUF file, or a Hugging Face folder to convert

  std::vector<TensorShape> shapes;
  for (const auto& t : in.tensors()) shapes.push_back({t.name, t.type, t.dims});
  std::vector<std::optional<loom_dtype>> mix_types;
  if (options.mix) {
    // The rules read the layer count and the query heads per KV head (of the first layer).
    const std::string arch = in.get_string("general.architecture").value_or("");
    MixModel model;
    model.n_layers = static_cast<int>(in.get_uint(arch + ".block_count").value_or(0));
    auto first = [&](const std::string& key) -> int64_t {
      if (auto v = in.get_int(key)) return *v;
      const auto list = in.get_int_array(key);
      return list.empty() ? 0 : list.front();
    };
    const int64_t heads = first(arch + ".attention.head_count"), kv_heads = first(arch + ".attention.head_count_kv");
    model.n_gqa = kv_heads > 0 ? static_cast<int>(heads / kv_heads) : 1;
    if (model.n_layers <= 0) throw Error("--type " + options.mix->name + ": the input has no " + arch + ".block_count, which the mix's rules need");
    mix_types = mix_tensor_types(*options.mix, model, shapes);
  }
  const std::vector<TensorPlan> plans =
      plan_tensors(shapes, quantizer, options.target, options.embeddings, options.mix ? &mix_types : nullptr, options.as_converter);

  QuantizeReport report;
  CalibrationStats calibration;
  if (!options.calibration.empty()) {
    if (options.target != LOOM_DTYPE_I4_G128) {
      throw Error("--calibration is only used by --type I4_G128 (the activation-aware format)");
    }
    calibration = collect_calibration(in, quantizer, options.calibration, options.n_threads);
    report.n_calibration_tokens = calibration.n_tokens;
  }

  gguf::GgufWriter writer(in.alignment());
  copy_gguf_metadata(in, writer, {"general.file_type"});
  report.file_type = options.mix ? options.mix->file_type : file_type_for(options.target);
  writer.set_uint32("general.file_type", report.file_type);
  if (!writer.has_key("general.quantization_version")) writer.set_uint32("general.quantization_version", 2);
  writer.set_string("loom.quantize.type", options.mix ? options.mix->name : dtype_name(options.target));
  if (!options.mix)
    writer.set_string("loom.quantize.embeddings", dtype_name(embedding_type_for(options.target, options.embeddings)));
  if (options.simulate && is_loom_only_type(options.target)) {
    writer.set_string("loom.quantize.simulated", dtype_name(options.target) +
                                                     " tensors stored as F32 holding their decoded values");
  }
  if (!options.calibration.empty()) {
    writer.set_string("loom.quantize.importance", "token-embedding x norm-weight statistics of " +
                                                      options.calibration.filename().string());
  }

  for (size_t i = 0; i < plans.size(); ++i) {
    const TensorPlan& plan = plans[i];
    if (progress) progress(i, plans.size(), plan.name);
    const gguf::TensorInfo& info = in.tensors()[i];
    const auto bytes = in.tensor_data(info);
    TensorReport r;
    r.plan = plan;
    r.bytes_in = bytes.size();
    if (plan.action == TensorAction::copy) {
      writer.add_tensor(plan.name, plan.to, plan.dims, std::vector<uint8_t>(bytes.begin(), bytes.end()));
      r.bytes_out = bytes.size();
    } else {
      const std::vector<float> values =
          decode_tensor(quantizer, plan.from, bytes, plan.n_rows, plan.n_cols, options.n_threads);
      for (size_t k = 0; k < values.size(); ++k) {
        if (!std::isfinite(values[k])) {
          throw Error("tensor '" + plan.name + "' holds a non-finite value at element " + std::to_string(k));
        }
      }
      std::span<const float> importance;
      if (plan.to == LOOM_DTYPE_I4_G128) {
        if (auto it = calibration.importance.find(plan.name); it != calibration.importance.end()) {
          importance = it->second;
          r.used_importance = true;
        }
      }
      std::vector<uint8_t> encoded =
          encode_tensor(quantizer, plan.to, values, plan.n_rows, plan.n_cols, importance, options.n_threads);
      const std::vector<float> back =
          decode_tensor(quantizer, plan.to, encoded, plan.n_rows, plan.n_cols, options.n_threads);
      const ErrorStats e = compare(values, back);
      r.rms_input = e.rms_in;
      r.rel_rms_error = e.rel_rms;
      r.rel_max_error = e.rel_max;
      r.bytes_out = encoded.size();
      if (options.simulate && is_loom_only_type(plan.to)) {
        r.plan.note += std::string(r.plan.note.empty() ? "" : "; ") + "simulated: stored as F32";
        writer.add_tensor(plan.name, LOOM_DTYPE_F32, plan.dims, encode_tensor(quantizer, LOOM_DTYPE_F32, back,
                                                                                plan.n_rows, plan.n_cols, {}, 1));
      } else {
        writer.add_tensor(plan.name, plan.to, plan.dims, std::move(encoded));
      }
    }
    report.bytes_in += r.bytes_in;
    report.bytes_out += r.bytes_out;
    report.n_weights += info.n_elements;
    report.tensors.push_back(std::move(r));
  }
  if (progress) progress(plans.size(), plans.size(), "writing " + options.output.string());

  fs::path temp = options.output;
  temp += ".loom-tmp";
  try {
    writer.write(temp);
    std::error_code ec;
    fs::rename(temp, options.output, ec);
    if (ec) throw Error("cannot move '" + temp.string() + "' to '" + options.output.string() + "': " + ec.message());
  } catch (...) {
    std::error_code ec;
    fs::remove(temp, ec);
    throw;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace loom
