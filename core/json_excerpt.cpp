#include "core/json_excerpt.h"

#include "core/printable.h"

namespace sublet {
namespace {

constexpr int kMaxDepth = 3;

// Appends `value` to `out`, deeper levels as "[...]" / "{...}"; stops once `out` is past `budget`.
void append(const nlohmann::json& value, int depth, std::size_t budget, std::string& out) {
  if (out.size() > budget) return;
  if (value.is_array()) {
    if (depth >= kMaxDepth) {
      out += value.empty() ? "[]" : "[...]";
      return;
    }
    out += '[';
    bool first = true;
    for (const auto& item : value) {
      if (out.size() > budget) break;
      if (!first) out += ", ";
      first = false;
      append(item, depth + 1, budget, out);
    }
    out += ']';
  } else if (value.is_object()) {
    if (depth >= kMaxDepth) {
      out += value.empty() ? "{}" : "{...}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (out.size() > budget) break;
      if (!first) out += ", ";
      first = false;
      out += nlohmann::json(key).dump() + ": ";
      append(item, depth + 1, budget, out);
    }
    out += '}';
  } else {
    out += value.dump();  // a scalar: not recursive
  }
}

}  // namespace

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars) {
  std::string out;
  append(value, 0, max_chars, out);
  return printable(out, max_chars);
}

}  // namespace sublet
