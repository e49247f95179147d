// examples/variable_length_oom: an out-of-memory error with room to spare under PyTorch's default
// allocator settings, on a variable-length GPT run, and the settings that fix it.
//   variable_length_oom [cpu|cuda|cuda:N]
#include <iostream>

#include "core/errors.h"
#include "examples/variable_length_oom.h"
#include "memory/registry.h"

int main(int argc, char** argv) {
  try {
    sublet::examples::VariableLengthOomOptions options;
    options.device = argc > 1 ? sublet::Device::parse(argv[1]) : sublet::memory::default_device();
    return sublet::examples::variable_length_oom_demo(options, std::cout);
  } catch (const sublet::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
