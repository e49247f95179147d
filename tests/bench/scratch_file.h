#pragma once
// A file under the temporary directory that removes itself.
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace sublet::testing {

class ScratchFile {
 public:
  explicit ScratchFile(const std::string& contents, const std::string& suffix = ".json") {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("sublet-bench-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + suffix))
                .string();
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace sublet::testing
