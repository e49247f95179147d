#pragma once
// Helpers shared by the data and checkpoint tests: a scratch directory that cleans up after
// itself, raw file writing, and checks on the text of the IoError a call throws.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"

namespace sublet::testing {

class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("sublet-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_raw(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

inline std::vector<std::uint8_t> read_raw(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The message of the IoError that `call` throws; records a failure if it throws nothing or
// another type.
template <typename Call>
std::string io_error_of(Call&& call) {
  try {
    call();
  } catch (const IoError& error) {
    return error.what();
  } catch (const std::exception& other) {
    ADD_FAILURE() << "expected IoError, got another exception: " << other.what();
    return {};
  }
  ADD_FAILURE() << "expected IoError, nothing was thrown";
  return {};
}

// Asserts that `message` contains every one of `parts` (file name, expected and found values).
inline void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos)
        << "message does not mention \"" << part << "\":\n  " << message;
  }
}

}  // namespace sublet::testing
