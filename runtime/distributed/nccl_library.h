#pragma once
// NCCL, loaded at run time. sublet links no NCCL: a build runs on machines without it (CI, the
// CPU), and data parallel finds the library when it starts. Where: TuningOptions::nccl_library
// (core/tuning.h), by default libnccl.so.2 on the loader's path (the CUDA toolkit's, or a PyTorch virtual
// environment's .../site-packages/nvidia/nccl/lib put on LD_LIBRARY_PATH).
// CUDA builds only; the types are nccl.h's, so the ABI is the header's.
#include <nccl.h>

#include <string>

namespace sublet::distributed {

struct NcclLibrary {
  std::string path;  // what was loaded
  int version = 0;   // ncclGetVersion: e.g. 22809 for 2.28.9

  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
};

// Loads NCCL from tuning().nccl_library, once per process. Throws DistributedError saying where it
// looked and how to point sublet at a library when none loads, or when one lacks a function
// (older than 2.10: ncclAvg).
const NcclLibrary& nccl();
// Loads the NCCL at `path` (a file, or a name the loader searches for), as nccl() does.
NcclLibrary load_nccl(const std::string& path);

// Throws DistributedError "<what>: NCCL error <code> (<NCCL's text>)" unless result is ncclSuccess.
void check_nccl(ncclResult_t result, const char* what);

}  // namespace sublet::distributed
