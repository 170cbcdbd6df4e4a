#include "embed/embedder.h"

#include <cmath>

#include "common/error.h"

namespace loom::embed {

void check_inputs(const std::vector<std::vector<int32_t>>& inputs, int64_t longest, const std::string& limit, int64_t n_vocab) {
  for (size_t i = 0; i < inputs.size(); i++) {
    const std::string which = "input " + std::to_string(i) + ": ";
    if (inputs[i].empty()) throw Error(which + "it holds no tokens");
    if (int64_t(inputs[i].size()) > longest)
      throw Error(which + std::to_string(inputs[i].size()) + " tokens, more than the " + std::to_string(longest) + " this model takes" + limit);
    for (int32_t id : inputs[i])
      if (id < 0 || id >= n_vocab)
        throw Error(which + "token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
  }
}

std::vector<float> pool_rows(const float* rows, size_t count, size_t dim, bool normalize) {
  std::vector<double> sum(dim, 0.0);
  for (size_t r = 0; r < count; r++)
    for (size_t j = 0; j < dim; j++) sum[j] += rows[r * dim + j];
  double norm = 0.0;
  for (double& s : sum) {
    s /= double(count);
    norm += s * s;
  }
  const double scale = normalize && norm > 0.0 ? 1.0 / std::sqrt(norm) : 1.0;
  std::vector<float> out(dim);
  for (size_t j = 0; j < dim; j++) out[j] = float(sum[j] * scale);
  return out;
}

}  // namespace loom::embed
