// ops::CapturedIndexChecks (ops/captured_index_checks.h) on the host: verdicts come from the room
// reserved before the capture, read "none" until a replay writes them, are read in capture order
// and the first bad one's report throws; the room's capacity is enforced; the scope installs the
// checks for its lifetime and restores the previous ones. (The device side, a replay writing the
// verdicts, is tests/runtime/test_gpt_cuda_graph.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/errors.h"
#include "memory/registry.h"
#include "ops/captured_index_checks.h"

namespace sublet::ops {
namespace {

memory::CachingAllocator& host() { return memory::allocator_for(Device::cpu()); }

memory::ScopedBlock scratch() { return memory::ScopedBlock(host(), 8); }

OutOfRangeReport throwing(const std::string& op, std::vector<std::string>* called) {
  return [op, called](const OutOfRange& bad) {
    called->push_back(op);
    throw std::runtime_error(op + " " + std::to_string(bad.position) + " " + std::to_string(bad.value));
  };
}

// What a replay leaves in a verdict.
void write(std::int64_t* verdict, std::int64_t position, std::int64_t value) {
  verdict[0] = position;
  verdict[1] = value;
}

TEST(CapturedIndexChecks, TheFirstBadCheckInCaptureOrderThrows) {
  std::vector<std::string> called;
  CapturedIndexChecks checks;
  checks.reserve(host(), nullptr, 4);
  std::int64_t* embedding = checks.add(scratch(), throwing("embedding", &called));
  std::int64_t* loss = checks.add(scratch(), throwing("cross_entropy", &called));
  std::int64_t* gather = checks.add(scratch(), throwing("gather", &called));
  EXPECT_EQ(checks.size(), 3u);
  EXPECT_EQ(embedding[0], -1);  // no replay yet
  EXPECT_NO_THROW(checks.throw_first_failure());
  write(loss, 7, 99);
  write(gather, 2, -5);
  try {
    checks.throw_first_failure();
    FAIL() << "expected the second check's error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "cross_entropy 7 99");
  }
  EXPECT_EQ(called, std::vector<std::string>{"cross_entropy"});
  write(loss, -1, 0);  // the next replay: clean there, position 0 bad in the first
  write(embedding, 0, 50304);
  EXPECT_THROW(checks.throw_first_failure(), std::runtime_error);
  EXPECT_EQ(called, (std::vector<std::string>{"cross_entropy", "embedding"}));
}

TEST(CapturedIndexChecks, RoomIsReservedBeforeAndLimited) {
  std::vector<std::string> called;
  CapturedIndexChecks checks;
  EXPECT_THROW(checks.add(scratch(), throwing("embedding", &called)), Error);  // nothing reserved
  checks.reserve(host(), nullptr, 2);
  EXPECT_EQ(checks.capacity(), 2u);
  checks.add(scratch(), throwing("embedding", &called));
  checks.add(scratch(), throwing("cross_entropy", &called));
  try {
    checks.add(scratch(), throwing("gather", &called));
    FAIL() << "expected the room to be full";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("met index check 3, and its verdicts have room for 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(checks.reserve(host(), nullptr, 8), Error);  // the checks' verdicts live in the room
  checks.clear();
  EXPECT_EQ(checks.size(), 0u);
  EXPECT_NO_THROW(checks.throw_first_failure());
  checks.reserve(host(), nullptr, 8);
  EXPECT_EQ(checks.capacity(), 8u);
  checks.reserve(host(), nullptr, 4);  // large enough already
  EXPECT_EQ(checks.capacity(), 8u);
  EXPECT_EQ(checks.add(scratch(), throwing("embedding", &called))[0], -1);
  EXPECT_TRUE(called.empty());
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
