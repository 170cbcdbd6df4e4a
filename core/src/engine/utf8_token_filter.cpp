#include "engine/utf8_token_filter.h"

namespace loom {

namespace {

// States past Utf8TokenFilter::kStart: how many continuation bytes are still due, and the range the next one must
// fall in (RFC 3629: E0 needs A0-BF next, ED 80-9F, F0 90-BF, F4 80-8F; the others 80-BF).
constexpr uint8_t kNeed1 = 1, kNeed2 = 2, kNeed3 = 3, kAfterE0 = 4, kAfterED = 5, kAfterF0 = 6, kAfterF4 = 7;

bool in_range(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }

}  // namespace

Utf8TokenFilter::State Utf8TokenFilter::step(State state, unsigned char b) {
  switch (state) {
    case kStart:
      if (b <= 0x7F) return kStart;
      if (in_range(b, 0xC2, 0xDF)) return kNeed1;
      if (b == 0xE0) return kAfterE0;
      if (b == 0xED) return kAfterED;
      if (in_range(b, 0xE1, 0xEF)) return kNeed2;
      if (b == 0xF0) return kAfterF0;
      if (in_range(b, 0xF1, 0xF3)) return kNeed3;
      if (b == 0xF4) return kAfterF4;
      return kInvalid;  // a stray continuation byte, C0, C1 or F5-FF
    case kNeed1: return in_range(b, 0x80, 0xBF) ? kStart : kInvalid;
    case kNeed2: return in_range(b, 0x80, 0xBF) ? kNeed1 : kInvalid;
    case kNeed3: return in_range(b, 0x80, 0xBF) ? kNeed2 : kInvalid;
    case kAfterE0: return in_range(b, 0xA0, 0xBF) ? kNeed1 : kInvalid;
    case kAfterED: return in_range(b, 0x80, 0x9F) ? kNeed1 : kInvalid;
    case kAfterF0: return in_range(b, 0x90, 0xBF) ? kNeed2 : kInvalid;
    case kAfterF4: return in_range(b, 0x80, 0x8F) ? kNeed2 : kInvalid;
    default: return kInvalid;
  }
}

Utf8TokenFilter::Utf8TokenFilter(const std::vector<std::string>& pieces) : pieces_(pieces) {
  const size_t words = (pieces.size() + 31) / 32;
  for (int s = 0; s < kStates; ++s) {
    allowed_[s].assign(words, 0);
    for (size_t t = 0; t < pieces.size(); ++t) {
      if (after(static_cast<State>(s), static_cast<int32_t>(t)) != kInvalid) allowed_[s][t / 32] |= 1u << (t % 32);
    }
  }
}

Utf8TokenFilter::State Utf8TokenFilter::after(State state, int32_t token) const {
  if (token < 0 || static_cast<size_t>(token) >= pieces_.size()) return state;
  for (unsigned char b : pieces_[static_cast<size_t>(token)]) {
    state = step(state, b);
    if (state == kInvalid) return kInvalid;
  }
  return state;
}

}  // namespace loom
