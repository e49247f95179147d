#pragma once
// Gloo, loaded at run time through sublet's shim (gloo_shim_abi.h), as NCCL is (nccl_library.h):
// sublet links no Gloo, so a binary starts on machines without libgloo and only `--backend gloo`
// needs it. Where: the tuning table's gloo_library if set; else libsublet_gloo.so next to the running
// program; else the shim this build made (its path is compiled in). The shim finds libgloo.so.0
// and its dependencies next to itself first (its run path is $ORIGIN), then on the loader's path.
#include <string>
#include <vector>

#include "runtime/distributed/gloo_shim_abi.h"

namespace sublet::distributed {

struct GlooLibrary {
  std::string path;  // the shim that was loaded
  gloo_shim::ConnectFunction connect = nullptr;
};

// Loads the shim once per process. Throws DistributedError saying where it looked, what the
// loader said (a missing libgloo.so.0 shows here) and how to point sublet at a shim.
const GlooLibrary& gloo();

// Where the shim is looked for, in order (for messages and `sublet config`-like reports).
std::vector<std::string> gloo_shim_candidates();

}  // namespace sublet::distributed
