// Checks a plugin's function table before the host uses it: big enough for the ABI version the
// host was built for, and every mandatory slot present. Optional slots may be NULL (unimplemented).
#pragma once

#include <optional>
#include <string>

#include "loom/loom.h"

namespace loom {

// nullopt when the table is usable, otherwise what is wrong with it.
std::optional<std::string> validate_plugin_table(loom_plugin_kind kind, const void* table);

}  // namespace loom

// The slot `member` of a table that may be older (smaller) than this header, or NULL when absent.
#define LOOM_SLOT(table, type, member) (LOOM_HAS_MEMBER(table, type, member) ? (table)->member : nullptr)
