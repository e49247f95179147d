#pragma once
// The files one command reads and writes, checked against each other before the work starts:
// an output may not name an input of another kind, nor another output, in the same run (after
// following links; hard links count as the same file). `--resume X --checkpoint X` stays
// allowed (the checkpoint is meant to be updated in place); `replay T --json T` is refused, since
// it would replace the trace with its own report.
#include <filesystem>
#include <string>
#include <vector>

namespace sublet::cli {

class RunFiles {
 public:
  // `kind` names what the file holds ("checkpoint", "trace", "dataset", "report", ...); `flag`
  // is how the user named it ("--json", "trace", "--data-dir"). Empty paths are ignored.
  RunFiles& input(const std::string& flag, const std::filesystem::path& path, const std::string& kind);
  RunFiles& output(const std::string& flag, const std::filesystem::path& path, const std::string& kind);
  // Throws IoError naming both flags and paths when an output would overwrite another file of
  // the run, and for a path that cannot be resolved (a link loop, a name too long).
  void check() const;

 private:
  struct File {
    std::string flag;
    std::filesystem::path path;
    std::string kind;
    bool is_output;
  };
  std::vector<File> files_;
};

}  // namespace sublet::cli
