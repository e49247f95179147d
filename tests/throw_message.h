#pragma once
// message_of<E>(f): runs f, which must throw E, and returns the message (a test failure, with
// what happened, when f throws another type or nothing).
#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace sublet::testing {

template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another type than expected: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

}  // namespace sublet::testing
