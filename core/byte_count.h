#pragma once
// Byte counts read from files, which may be anything up to 2^64 - 1: "512 B", "3.00 EiB".
// format_bytes (format_bytes.h) takes a signed count and would print the largest as negative.
#include <cstdint>
#include <string>

namespace sublet {

std::string format_byte_count(std::uint64_t bytes);

}  // namespace sublet
