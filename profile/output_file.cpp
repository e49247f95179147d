#include "profile/output_file.h"

#include "core/atomic_write.h"

namespace sublet::profile {

void write_text_file(const std::string& path, const std::string& content) {
  io::write_text_atomically(path, content);
}

}  // namespace sublet::profile
