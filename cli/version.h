#pragma once
// What `sublet --version` prints: the release, the git revision of the checkout it was built from
// (empty outside a checkout), and the backends compiled in.
#include <string>
#include <string_view>

namespace sublet::cli {

std::string_view build_revision();  // generated at build time (cmake/WriteRevision.cmake)
std::string version_text();

}  // namespace sublet::cli
