#pragma once
#include <cstdint>
#include <string>

namespace sublet {

// "512 B", "3.50 KiB", "20.00 MiB", "1.25 GiB": the units memory_summary and errors use.
std::string format_bytes(std::int64_t bytes);

// The same for byte counts read from files, which may be anything up to 2^64 - 1 ("3.00 EiB"),
// where format_bytes would print the largest as negative.
std::string format_byte_count(std::uint64_t bytes);

}  // namespace sublet
