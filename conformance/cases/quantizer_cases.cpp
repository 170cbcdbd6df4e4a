// Conformance cases for the quantizer kind.
#include "conformance_case.h"

namespace loom::conformance {

std::vector<Case> quantizer_cases() { return {}; }

}  // namespace loom::conformance
