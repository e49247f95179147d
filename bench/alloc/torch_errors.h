#pragma once
// c10's exceptions in sublet's words, for the torch plugin (C++17): the bench reports a failed
// cell with the exception's message, and a c10::Error's what() carries a C++ backtrace.
#include <c10/util/Exception.h>

#include <string>

#include "core/errors.h"

namespace sublet::bench {

// Runs f(); a c10::OutOfMemoryError becomes sublet::OutOfMemoryError, any other c10::Error a
// sublet::Error, both named "PyTorch <call>: <message without backtrace>".
template <typename F>
auto translate_c10_errors(const char* call, F&& f) {
  try {
    return f();
  } catch (const c10::OutOfMemoryError& e) {
    throw OutOfMemoryError(std::string("PyTorch ") + call + ": " + e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw Error(std::string("PyTorch ") + call + ": " + e.what_without_backtrace());
  }
}

}  // namespace sublet::bench
