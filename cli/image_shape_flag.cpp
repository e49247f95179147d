#include "cli/image_shape_flag.h"

#include <charconv>
#include <string_view>
#include <vector>

#include "core/errors.h"
#include "core/printable.h"

namespace sublet::cli {

ImageShape parse_image_shape(const std::string& flag, const std::string& text) {
  const auto refuse = [&](const std::string& why) {
    return ValueError(flag + ": expected CxHxW with positive integers, e.g. 3x32x32; found \"" + printable(text) + "\"" +
                      why);
  };
  std::vector<std::int64_t> sizes;
  std::string_view rest = text;
  for (;;) {
    const std::size_t cut = rest.find('x');
    const std::string_view part = rest.substr(0, cut);
    // from_chars alone would take a leading '-' and stop at the first non-digit.
    if (part.empty() || part.find_first_not_of("0123456789") != std::string_view::npos) throw refuse("");
    std::int64_t size = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), size);
    if (error == std::errc::result_out_of_range || size > kMaxImageShapeSize)
      throw refuse(" (" + printable(part, 24) + " is above " + std::to_string(kMaxImageShapeSize) + ")");
    if (error != std::errc() || end != part.data() + part.size() || size <= 0) throw refuse("");
    sizes.push_back(size);
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  if (sizes.size() != 3) throw refuse("");
  return {sizes[0], sizes[1], sizes[2]};
}

}  // namespace sublet::cli
