// Conformance cases for the backend kind.
#include "conformance_case.h"

namespace loom::conformance {

std::vector<Case> backend_cases() { return {}; }

}  // namespace loom::conformance
