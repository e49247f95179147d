#include "cli/version.h"

#include <fmt/format.h>

namespace sublet::cli {

std::string version_text() {
  std::string text = fmt::format("sublet {}", SUBLET_VERSION);
  if (!build_revision().empty()) text += fmt::format(" (revision {})", build_revision());
  text += fmt::format("\nbackends: CPU{}", SUBLET_CUDA_DESCRIPTION);
  return text;
}

}  // namespace sublet::cli
