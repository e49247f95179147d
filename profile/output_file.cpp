#include "profile/output_file.h"

#include "core/atomic_write.h"

namespace sublet::profile {

void write_text_file(const std::string& path, const std::string& content) {
  io::write_atomically(path, [&](std::FILE* file) { io::write_or_throw(file, content.data(), content.size(), path); });
}

}  // namespace sublet::profile
