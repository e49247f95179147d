// examples/two_step_release: the allocator's two-step release, on CUDA when present, else the CPU.
//   two_step_release [cpu|cuda]
#include <iostream>

#include "examples/two_step_release.h"
#include "core/errors.h"
#include "memory/registry.h"

int main(int argc, char** argv) {
  try {
    const sublet::Device device = argc > 1 ? sublet::Device::parse(argv[1]) : sublet::memory::default_device();
    return sublet::examples::two_step_release_demo(device, 256 * sublet::memory::kMiB, std::cout);
  } catch (const sublet::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
