// Conformance cases for the kv kind.
#include "conformance_case.h"

namespace loom::conformance {

std::vector<Case> kv_cases() { return {}; }

}  // namespace loom::conformance
