// cli/image_shape_flag: the one reader of CxHxW shapes (bench step --input, profile --input,
// train --synthetic-shape), its accepted forms and its one message.
#include "cli/image_shape_flag.h"

#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"

namespace sublet {
namespace {

using cli::ImageShape;
using cli::parse_image_shape;

std::string message_of(const std::string& flag, const std::string& text) {
  try {
    parse_image_shape(flag, text);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "(no error for " + text + ")";
}

TEST(CliImageShape, ReadsChannelsHeightWidthInThatOrder) {
  const ImageShape s = parse_image_shape("--input", "3x224x160");
  EXPECT_EQ(s.channels, 3);
  EXPECT_EQ(s.height, 224);
  EXPECT_EQ(s.width, 160);
  const ImageShape one = parse_image_shape("--input", "1x1x1");
  EXPECT_EQ(one.channels + one.height + one.width, 3);
  const ImageShape largest = parse_image_shape("--input", "1x1x2147483647");
  EXPECT_EQ(largest.width, cli::kMaxImageShapeSize);
}

TEST(CliImageShape, RefusesEveryMalformedTextWithOneMessage) {
  for (const char* bad : {"3x32", "3x32x32x1", "3x0x32", "0x32x32", "3x-2x32", "-3x2x32", "+3x2x32", "ax32x32",
                          "3x32x", "x3x32x32", "", "x", "3xx32", "3x32 x32", " 3x32x32", "3x32x32 ", "3X32X32",
                          "3*32*32", "3x32x3.5", "3,32,32"}) {
    EXPECT_EQ(message_of("--input", bad),
              std::string("--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"") + bad + "\"")
        << bad;
  }
}

TEST(CliImageShape, NamesTheFlagItReads) {
  EXPECT_EQ(message_of("--synthetic-shape", "3x32"),
            "--synthetic-shape: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x32\"");
}

TEST(CliImageShape, SaysWhichSizeIsTooLarge) {
  EXPECT_EQ(message_of("--input", "3x2147483648x32"),
            "--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x2147483648x32\" "
            "(2147483648 is above 2147483647)");
  // Beyond 64 bits too: no wrap-around to a small or negative size.
  EXPECT_EQ(message_of("--input", "3x99999999999999999999x32"),
            "--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x99999999999999999999x32\" "
            "(99999999999999999999 is above 2147483647)");
}

TEST(CliImageShape, EscapesControlCharactersInTheMessage) {
  const std::string message = message_of("--input", "3x\x1b[2Jx32");
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_NE(message.find("\\x1b"), std::string::npos) << message;
}

}  // namespace
}  // namespace sublet
