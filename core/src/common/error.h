// loom::Error — the one exception type inside the core. It never crosses the C ABI: every ABI edge
// catches it and turns it into a status plus message.
#pragma once

#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace loom
