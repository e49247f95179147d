#pragma once
// SUBLET_DEBUG_ASSERT(condition, message): an internal invariant, checked only in builds without
// NDEBUG (CMAKE_BUILD_TYPE=Debug), as PyTorch's TORCH_INTERNAL_ASSERT_DEBUG_ONLY. It states what
// the code around it relies on; a failure is a bug in sublet, not a user error, so it prints
// where and what and aborts rather than throwing an error a caller might catch and carry on.
// With NDEBUG the condition is not evaluated (it may be costly: a walk over a pool, a lookup);
// it is still compiled, inside sizeof, so that it cannot rot and its variables count as used.
// `message` is a string literal.
#include <cstdio>
#include <cstdlib>

namespace sublet::detail {

[[noreturn]] inline void debug_assert_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: internal invariant violated: %s (%s)\n", file, line, message, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace sublet::detail

#ifdef NDEBUG
#define SUBLET_DEBUG_ASSERT(condition, message) static_cast<void>(sizeof(static_cast<bool>(condition)))
#else
#define SUBLET_DEBUG_ASSERT(condition, message)                                                 \
  ((condition) ? static_cast<void>(0)                                                           \
               : ::sublet::detail::debug_assert_failed(#condition, message, __FILE__, __LINE__))
#endif
