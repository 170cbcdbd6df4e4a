// The conformance suite's vocabulary: a case runs against one loaded plugin and ends as
// pass, fail or not-supported. Tolerances belong to the case, never to a plugin's name.
#pragma once

#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "plugin/plugin_registry.h"

namespace loom::conformance {

enum class Outcome { pass, fail, not_supported };

struct CaseResult {
  std::string kind;  // plugin kind the case belongs to
  std::string name;
  Outcome outcome = Outcome::pass;
  std::string message;  // why it failed or is not supported
  double seconds = 0.0;
};

// Thrown by `require` (fail) and `not_supported` inside a case body.
struct CaseFailure : std::runtime_error { using std::runtime_error::runtime_error; };
struct CaseNotSupported : std::runtime_error { using std::runtime_error::runtime_error; };

struct CaseContext {
  std::shared_ptr<LoadedPlugin> plugin;
  const loom_host_services* host = nullptr;
  std::string plugin_config_json = "{}";  // passed to the plugin's create
};

inline void require(bool condition, const std::string& message) {
  if (!condition) throw CaseFailure(message);
}
[[noreturn]] inline void not_supported(const std::string& reason) { throw CaseNotSupported(reason); }

struct Case {
  std::string name;
  loom_plugin_kind kind = 0;  // 0 = applies to every kind
  std::function<void(CaseContext&)> run;
};

// Per-kind case lists, one file each under conformance/cases/.
std::vector<Case> abi_cases();      // every kind: version negotiation, struct sizes, NULL slots, init failure
std::vector<Case> backend_cases();  // each op vs the CPU reference, guard regions, paged attention
std::vector<Case> kv_cases();
std::vector<Case> kv_state_cases();       // ABI 1.6 state slots; appended by kv_cases()
std::vector<Case> kv_checkpoint_cases();  // ABI 1.7 state checkpoints; appended by kv_cases()
std::vector<Case> quantizer_cases();
std::vector<Case> sampler_cases();
std::vector<Case> drafter_cases();

}  // namespace loom::conformance
