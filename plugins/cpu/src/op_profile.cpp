#include "op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend_op_validation.h"

namespace loom::cpu {
namespace {

const char* op_name(loom_op_type type) {
  const char* name = plugin_support::op_type_name(type);
  return name != nullptr ? name : "?";
}

}  // namespace

bool OpProfile::enabled_by_environment() {
  const char* value = std::getenv("LOOM_CPU_PROFILE");
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

void OpProfile::add(const OpArgs& op, std::chrono::steady_clock::duration elapsed) {
  const bool many_tokens = op.type == LOOM_OP_MATMUL ? op.src[1].n_rows() > 1 : op.src[0].n_rows() > 1;
  const bool matmul = op.type == LOOM_OP_MATMUL;
  Totals& t = totals_[Key{op.type, op.src[0].dtype, matmul ? op.src[0].ne[0] : 0, matmul ? op.src[0].ne[1] : 0, many_tokens}];
  t.calls++;
  t.seconds += std::chrono::duration<double>(elapsed).count();
}

void OpProfile::print() const {
  std::vector<std::pair<Key, Totals>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows) total += r.second.seconds;
  std::fprintf(stderr, "cpu backend op profile (LOOM_CPU_PROFILE): %.3f s in ops\n", total);
  std::fprintf(stderr, "  %-16s %-6s %-12s %-6s %10s %10s %10s %6s\n", "op", "src0", "weight", "tokens", "calls", "total ms", "us/call", "share");
  for (const auto& [key, t] : rows) {
    const auto& [type, dtype, ne0, ne1, many] = key;
    const std::string shape = ne0 > 0 ? std::to_string(ne0) + "x" + std::to_string(ne1) : "";
    std::fprintf(stderr, "  %-16s %-6s %-12s %-6s %10llu %10.1f %10.1f %5.1f%%\n", op_name(type), dtype_name(dtype), shape.c_str(), many ? ">1" : "1",
                 static_cast<unsigned long long>(t.calls), t.seconds * 1e3, t.seconds * 1e6 / double(t.calls),
                 100.0 * t.seconds / total);
  }
}

}  // namespace loom::cpu
