// ops::CapturedIndexChecks (ops/captured_index_checks.h) on the host: the verdicts a replay writes
// are read in capture order and the first bad one's report throws; the scope installs the checks
// for its lifetime and restores the previous ones. (The device side, a replay writing the
// verdicts, is tests/runtime/test_gpt_cuda_graph.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "memory/registry.h"
#include "ops/captured_index_checks.h"

namespace sublet::ops {
namespace {

// A verdict block as the replay leaves it: [position or -1, value].
memory::ScopedBlock verdict(std::int64_t position, std::int64_t value) {
  memory::ScopedBlock block(memory::allocator_for(Device::cpu()), 2 * sizeof(std::int64_t));
  auto* v = static_cast<std::int64_t*>(block.get());
  v[0] = position;
  v[1] = value;
  return block;
}

memory::ScopedBlock scratch() { return memory::ScopedBlock(memory::allocator_for(Device::cpu()), 8); }

OutOfRangeReport throwing(const std::string& op, std::vector<std::string>* called) {
  return [op, called](const OutOfRange& bad) {
    called->push_back(op);
    throw std::runtime_error(op + " " + std::to_string(bad.position) + " " + std::to_string(bad.value));
  };
}

TEST(CapturedIndexChecks, TheFirstBadCheckInCaptureOrderThrows) {
  std::vector<std::string> called;
  CapturedIndexChecks checks;
  checks.add(scratch(), verdict(-1, 0), throwing("embedding", &called));
  checks.add(scratch(), verdict(7, 99), throwing("cross_entropy", &called));
  checks.add(scratch(), verdict(2, -5), throwing("gather", &called));
  EXPECT_EQ(checks.size(), 3u);
  try {
    checks.throw_first_failure();
    FAIL() << "expected the second check's error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cross_entropy 7 99");
  }
  EXPECT_EQ(called, std::vector<std::string>{"cross_entropy"});
}

TEST(CapturedIndexChecks, CleanVerdictsAndClearedChecksReportNothing) {
  std::vector<std::string> called;
  CapturedIndexChecks checks;
  checks.add(scratch(), verdict(-1, 0), throwing("embedding", &called));
  EXPECT_NO_THROW(checks.throw_first_failure());
  checks.add(scratch(), verdict(0, 123), throwing("cross_entropy", &called));
  EXPECT_THROW(checks.throw_first_failure(), std::runtime_error);
  checks.clear();
  EXPECT_EQ(checks.size(), 0u);
  EXPECT_NO_THROW(checks.throw_first_failure());
  EXPECT_EQ(called, std::vector<std::string>{"cross_entropy"});
}

TEST(CapturedIndexChecks, ScopeInstallsForItsLifetimeAndRestoresThePrevious) {
  EXPECT_EQ(captured_index_checks(), nullptr);
  CapturedIndexChecks outer, inner;
  {
    const CapturedIndexChecksScope a(outer);
    EXPECT_EQ(captured_index_checks(), &outer);
    {
      const CapturedIndexChecksScope b(inner);
      EXPECT_EQ(captured_index_checks(), &inner);
    }
    EXPECT_EQ(captured_index_checks(), &outer);
  }
  EXPECT_EQ(captured_index_checks(), nullptr);
}

}  // namespace
}  // namespace sublet::ops
