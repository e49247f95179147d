#pragma once
// The readers under test take file paths (they stream real files), so each fuzz input is
// written to one scratch file in memory-backed /dev/shm when present.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace sublet::fuzz {

inline std::filesystem::path scratch_file(const char* suffix) {
  const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  return dir / ("sublet_fuzz_" + std::to_string(getpid()) + suffix);
}

inline void write_input(const std::filesystem::path& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace sublet::fuzz
