// Conformance cases for the drafter kind.
#include "conformance_case.h"

namespace loom::conformance {

std::vector<Case> drafter_cases() { return {}; }

}  // namespace loom::conformance
