// The profiling overhead line of summary.txt: a figure only with its noise, and no false figure
// from single steps or from a measurement that was not made.
#include <gtest/gtest.h>

#include "profile/summary_report.h"

namespace sublet::profile {
namespace {

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(OverheadLine, NoUnprofiledStepsSaysSo) {
  const std::string line = overhead_line({10.0}, {});
  expect_contains(line, "not measured (--timing-steps 0)");
  EXPECT_EQ(line.find("mean of 0"), std::string::npos) << line;
  EXPECT_EQ(line.find('%'), std::string::npos) << line;
}

TEST(OverheadLine, SingleStepsGiveNoNoiseEstimate) {
  expect_contains(overhead_line({12.0}, {10.0}), "+20.0% from single steps, with no estimate of the noise");
}

TEST(OverheadLine, ADifferenceInsideTheNoiseIsNotAFigure) {
  // -21% with step times that vary by more than that: within the noise.
  const std::string line = overhead_line({8.0, 12.0, 4.0}, {10.0, 14.0, 6.0});
  expect_contains(line, "within the noise (-20.0% +- ");
}

TEST(OverheadLine, AClearDifferenceIsGivenWithItsError) {
  const std::string line = overhead_line({12.0, 12.1, 11.9}, {10.0, 10.1, 9.9});
  expect_contains(line, "+20.0% +- ");
  expect_contains(line, "(two standard errors)");
  expect_contains(line, "mean of 3, sd 0.10");
}

}  // namespace
}  // namespace sublet::profile
