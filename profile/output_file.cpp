#include "profile/output_file.h"

#include <cstdio>
#include <fstream>

#include "core/errors.h"

namespace sublet::profile {

void write_text_file(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) throw IoError(path + ": could not write the file");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw IoError(path + ": could not move the file into place");
}

}  // namespace sublet::profile
