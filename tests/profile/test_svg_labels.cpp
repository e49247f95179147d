// Axis labels of the profile's pictures: plain numbers, never an exponent ("1e+03 MiB").
#include <gtest/gtest.h>

#include "profile/svg_document.h"

namespace sublet::profile {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

TEST(SvgLabels, AxisLabelsArePlainNumbers) {
  EXPECT_EQ(axis_label(1000 * kMiB), "1000 MiB");
  EXPECT_EQ(axis_label(0), "0 MiB");
  EXPECT_EQ(axis_label(12.5 * kMiB), "12.5 MiB");
  EXPECT_EQ(axis_label(1.5 * 1024 * kMiB), "1.5 GiB");
  EXPECT_EQ(axis_label(0.25 * kMiB), "256 KiB");
  EXPECT_EQ(axis_label(2.0 * kMiB), "2 MiB");
}

// Above 1 GiB the axis rounds in GiB, so its five ticks are whole or half GiB.
TEST(SvgLabels, AxisMaximumRoundsInTheLabelsUnit) {
  EXPECT_EQ(nice_axis_max(3.5 * 1024 * kMiB), 4.0 * 1024 * kMiB);
  EXPECT_EQ(axis_label(nice_axis_max(4.17 * 1024 * kMiB) / 5), "1 GiB");
  EXPECT_EQ(nice_axis_max(700 * kMiB), 800 * kMiB);
}

}  // namespace
}  // namespace sublet::profile
