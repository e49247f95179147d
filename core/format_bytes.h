#pragma once
#include <cstdint>
#include <string>

namespace sublet {

// "512 B", "3.50 KiB", "20.00 MiB", "1.25 GiB": the units memory_summary and errors use.
std::string format_bytes(std::int64_t bytes);

}  // namespace sublet
