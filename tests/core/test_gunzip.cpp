// core/gunzip.h: decompression bounded by the format's header or a stated limit, so that a gzip
// bomb ends with an error after the bound, not with the machine out of memory.
#include <gtest/gtest.h>

#include <string>

#include "tests/gzip_bytes.h"
#include "core/errors.h"
#include "core/gunzip.h"

namespace sublet::io {
namespace {

using sublet::testing::gzip;

std::string error_of(const std::string& compressed, const GunzipLimit& limit) {
  try {
    gunzip(compressed, "in.gz", limit);
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "decompressed";
  return {};
}

TEST(Gunzip, DecompressesUpToTheLimitExactly) {
  const std::string data(5000, 'a');
  EXPECT_EQ(gunzip(gzip(data), "in.gz", {.max_bytes = 5000}), data);
  EXPECT_EQ(gunzip(gzip(data) + gzip(data), "in.gz", {.max_bytes = 10000}), data + data);  // concatenated members
  EXPECT_NE(error_of(gzip(data), {.max_bytes = 4999}).find("in.gz: decompresses to more than 4999 bytes, the limit"),
            std::string::npos);
}

// A header that announces 100 bytes bounds the output at 100, whatever the stated limit.
TEST(Gunzip, TheHeadersSizeBoundsTheOutput) {
  const GunzipLimit limit{.max_bytes = std::size_t{1} << 30,
                          .header_bytes = 4,
                          .size_from_header = [](std::string_view header) -> std::size_t {
                            return header == "HEAD" ? 100 : SIZE_MAX;
                          }};
  EXPECT_EQ(gunzip(gzip("HEAD" + std::string(96, 'x')), "in.gz", limit).size(), 100u);
  EXPECT_NE(error_of(gzip("HEAD" + std::string(std::size_t{32} << 20, '\0')), limit)
                .find("decompresses to more than 100 bytes, the size its header announces"),
            std::string::npos);
  // Not the format's header: the stated limit applies.
  EXPECT_EQ(gunzip(gzip("XXXX" + std::string(200, 'x')), "in.gz", limit).size(), 204u);
}

TEST(Gunzip, TheStatedLimitIsAHundredTimesTheInputAndAtLeast256MiB) {
  EXPECT_EQ(default_gunzip_limit(1000), std::size_t{256} << 20);
  EXPECT_EQ(default_gunzip_limit(std::size_t{10} << 20), std::size_t{1000} << 20);
  EXPECT_EQ(default_gunzip_limit(SIZE_MAX / 2), SIZE_MAX);
}

// The cap cannot be lifted again: this test comes after every test of the default limit in this
// file (ctest also runs each test in a process of its own).
TEST(Gunzip, AProcessCapLowersTheDefaultAndIsNeverRaised) {
  cap_default_gunzip_limit(std::size_t{1} << 20);
  EXPECT_EQ(default_gunzip_limit(1000), std::size_t{1} << 20);
  EXPECT_EQ(default_gunzip_limit(std::size_t{10} << 20), std::size_t{1} << 20);
  cap_default_gunzip_limit(std::size_t{2} << 20);
  EXPECT_EQ(default_gunzip_limit(1000), std::size_t{1} << 20);
  EXPECT_NE(error_of(gzip(std::string((std::size_t{1} << 20) + 1, 'z')), {.max_bytes = default_gunzip_limit(1000)})
                .find("decompresses to more than 1048576 bytes"),
            std::string::npos);
}

TEST(Gunzip, CorruptAndTruncatedDataAreErrors) {
  const std::string gz = gzip(std::string(1000, 'b'));
  EXPECT_NE(error_of(gz.substr(0, gz.size() - 6), {.max_bytes = 1 << 20}).find("the gzip data ends early"), std::string::npos);
  EXPECT_NE(error_of(gz + "xyz", {.max_bytes = 1 << 20}).find("3 bytes after the end of the gzip data"), std::string::npos);
}

}  // namespace
}  // namespace sublet::io
