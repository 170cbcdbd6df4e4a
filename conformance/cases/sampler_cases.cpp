// Conformance cases for the sampler kind.
#include "conformance_case.h"

namespace loom::conformance {

std::vector<Case> sampler_cases() { return {}; }

}  // namespace loom::conformance
