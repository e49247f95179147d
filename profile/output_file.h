#pragma once
// Report files are written whole to a temporary name and renamed into place, so a reader (a
// browser refreshing, a script polling) never sees half a file.
#include <string>

namespace sublet::profile {

void write_text_file(const std::string& path, const std::string& content);  // IoError on failure

}  // namespace sublet::profile
