// Keeps constrained output valid UTF-8. xgrammar 0.2.9 decodes bytes leniently: its character
// classes (a JSON string's characters, a regex's '.') accept UTF-16 surrogates encoded as UTF-8
// (ED A0 80) and overlong forms (E0 80 80), which are not UTF-8, so a model with byte tokens could
// write a string no JSON parser reads back as the grammar counted it. This filter tracks where the
// output stands in a UTF-8 sequence (RFC 3629's table, 8 states) and allows only the tokens whose
// bytes continue it validly; the grammar's mask is ANDed with it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace loom {

class Utf8TokenFilter {
 public:
  using State = uint8_t;
  static constexpr State kStart = 0;  // between characters
  static constexpr State kInvalid = 255;

  // pieces[t]: token t's bytes ("" for control tokens, which are allowed in every state).
  explicit Utf8TokenFilter(const std::vector<std::string>& pieces);

  // Bitmask of the tokens allowed in `state` (bit t of word t / 32), over the pieces given.
  const std::vector<uint32_t>& allowed(State state) const { return allowed_[state]; }
  // The state after token `token`; kInvalid when its bytes break UTF-8 from `state`.
  State after(State state, int32_t token) const;

 private:
  static State step(State state, unsigned char byte);
  static constexpr int kStates = 8;
  std::vector<std::string> pieces_;
  std::array<std::vector<uint32_t>, kStates> allowed_;
};

}  // namespace loom
