#include "cli/run_files.h"

#include <sys/stat.h>

#include "core/errors.h"

namespace sublet::cli {
namespace {

namespace fs = std::filesystem;

struct Identity {
  bool exists = false;
  bool regular = false;  // devices and FIFOs are written in place and may be shared (/dev/null)
  dev_t device = 0;
  ino_t inode = 0;
  fs::path resolved;  // for a file that does not exist yet
};

Identity identify(const std::string& flag, const fs::path& path) {
  Identity id;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    id.exists = true;
    id.regular = S_ISREG(info.st_mode);
    id.device = info.st_dev;
    id.inode = info.st_ino;
    return id;
  }
  std::error_code error;
  id.resolved = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) throw IoError(flag + " " + path.string() + ": " + error.message());
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  if (a.exists != b.exists) return false;
  if (a.exists) return a.regular && b.regular && a.device == b.device && a.inode == b.inode;
  return a.resolved == b.resolved;
}

std::string named(const std::string& flag, const fs::path& path) {
  return flag == path.string() ? flag : flag + " " + path.string();
}

}  // namespace

RunFiles& RunFiles::input(const std::string& flag, const fs::path& path, const std::string& kind) {
  if (!path.empty() && path != "-") files_.push_back({flag, path, kind, false});
  return *this;
}

RunFiles& RunFiles::output(const std::string& flag, const fs::path& path, const std::string& kind) {
  if (!path.empty()) files_.push_back({flag, path, kind, true});
  return *this;
}

void RunFiles::check() const {
  std::vector<Identity> ids;
  ids.reserve(files_.size());
  for (const File& f : files_) ids.push_back(identify(f.flag, f.path));
  for (std::size_t o = 0; o < files_.size(); ++o) {
    const File& out = files_[o];
    if (!out.is_output) continue;
    for (std::size_t other = 0; other < files_.size(); ++other) {
      if (other == o || !same_file(ids[o], ids[other])) continue;
      const File& f = files_[other];
      if (!f.is_output && f.kind == out.kind) continue;  // updated in place, as --resume X --checkpoint X
      if (f.is_output && other > o) continue;            // said once, at the later flag
      throw IoError(named(out.flag, out.path) + ": the same file as " + named(f.flag, f.path) + ", " +
                    (f.is_output ? "another output of this run; each output needs a file of its own"
                                 : "the " + f.kind + " this run reads; writing the " + out.kind +
                                       " there would replace it. Choose another name"));
    }
  }
}

}  // namespace sublet::cli
