#pragma once
// Reading dataset files that must be regular files. A FIFO, socket or device named as a dataset
// would block a plain open() or read forever, so these open without blocking, ask the open file
// what it is, and refuse anything but a regular file with an IoError naming the path.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace sublet::data {

// The whole file. Throws IoError (naming the path) when it is missing, not a regular file, or
// cannot be read completely.
std::vector<std::uint8_t> read_regular_file(const std::filesystem::path& path);

// A read-only memory mapping of a whole regular file: token files can be far larger than memory,
// and the operating system pages in only the windows a run reads.
class MappedFile {
 public:
  // Throws IoError (naming the path) as read_regular_file does. An empty file maps to no bytes.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sublet::data
