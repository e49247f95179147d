#pragma once
// A JSON value from an untrusted file, shown in an error message: at most a few levels deep and
// a few hundred characters, with control characters escaped. nlohmann::json::dump() recurses
// once per level (a header of 10^5 nested brackets overflowed the stack) and prints everything.
#include <nlohmann/json.hpp>
#include <string>

namespace sublet {

std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 120);

}  // namespace sublet
