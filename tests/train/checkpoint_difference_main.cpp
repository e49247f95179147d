// checkpoint_difference A.ckpt B.ckpt [BOUND]: prints how far A's model is from B's (relative to
// B's largest value) and exits 1 when that is above BOUND (default 1e-5). For comparing runs made
// elsewhere, e.g. data parallel on a GPU machine against one process.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tests/train/checkpoint_difference.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: checkpoint_difference A.ckpt B.ckpt [BOUND]\n");
    return 2;
  }
  try {
    const double bound = argc > 3 ? std::atof(argv[3]) : 1e-5;
    const auto d = sublet::testing::checkpoint_difference(argv[1], argv[2]);
    if (d.where.empty()) {
      std::printf("relative difference %g (every value equal); bound %g: %s\n", d.relative, bound,
                  d.relative <= bound ? "within" : "ABOVE");
    } else {
      std::printf("relative difference %g (largest %g, in %s); bound %g: %s\n", d.relative, d.largest, d.where.c_str(),
                  bound, d.relative <= bound ? "within" : "ABOVE");
    }
    return d.relative <= bound ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
