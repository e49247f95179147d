// The --precision vocabulary: names round-trip, the autocast dtype and loss scaling per recipe,
// and a bad name is one ValueError naming the flag, the text and the allowed values.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "runtime/amp/precision.h"
#include "tests/throw_message.h"

namespace sublet::amp {
namespace {

TEST(Precision, NamesRoundTrip) {
  for (const Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
    EXPECT_EQ(parse_precision(precision_name(p)), p) << precision_name(p);
  EXPECT_EQ(parse_precision("bfloat16"), Precision::Bf16);
  EXPECT_EQ(parse_precision("float16"), Precision::Fp16);
  EXPECT_EQ(parse_precision("float32"), Precision::Fp32);
}

TEST(Precision, AutocastDtypeAndLossScaling) {
  EXPECT_FALSE(autocast_dtype_of(Precision::Fp32).has_value());
  EXPECT_EQ(autocast_dtype_of(Precision::Bf16), DType::BFloat16);
  EXPECT_EQ(autocast_dtype_of(Precision::Fp16), DType::Float16);
  EXPECT_TRUE(needs_loss_scaling(Precision::Fp16));
  EXPECT_FALSE(needs_loss_scaling(Precision::Bf16));
  EXPECT_FALSE(needs_loss_scaling(Precision::Fp32));
}

TEST(Precision, UnknownNameNamesFlagTextAndChoices) {
  const std::string message = sublet::testing::message_of<ValueError>([] { parse_precision("fp8", "--precision"); });
  EXPECT_NE(message.find("--precision 'fp8'"), std::string::npos) << message;
  EXPECT_NE(message.find("fp32, bf16 or fp16"), std::string::npos) << message;
}

}  // namespace
}  // namespace sublet::amp
